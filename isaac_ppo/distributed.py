"""Data-parallel training on torch.distributed (NCCL on GPUs, gloo on CPUs): which rank this process is, and the
few collective operations the learner needs.

Every rank simulates its own envs and learns from its own batch; what keeps the ranks one learner:
- rank 0's initial parameters and normaliser statistics are broadcast to all;
- per minibatch, the gradients (and the minibatch's KL and loss, riding along) are flattened into one buffer and
  all-reduced once, then divided by the world size: the mean gradient of the union of the ranks' minibatches,
  and the same adaptive learning rate everywhere;
- advantages are standardised with the mean and std of all ranks' batches;
- the normalisers fold in the exact moments (count, mean, variance) of all ranks' batches;
- the scheduler's plan is decided on rank 0 and broadcast; episode statistics and env steps are summed.

`Local` is the single-process case: the same interface with nothing to communicate, so the learner has one code
path. `setup(cfg)` returns one or the other.
"""
from __future__ import annotations

import datetime
import hashlib
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from isaac_ppo.errors import UserError

# what torchrun (and submitit's TorchDistributedEnvironment) put in the environment of each process
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def cores() -> int:
    """The CPUs this process may use (the ranks of one node share them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Local:
    """One process: every collective is the identity."""

    rank = 0
    local_rank = 0
    world_size = 1
    local_world_size = 1
    is_main = True
    backend = None

    def all_reduce_mean_(self, flat: torch.Tensor) -> torch.Tensor:
        return flat

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        return values

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def broadcast_module(self, module: torch.nn.Module) -> None:
        pass

    def gather_objects(self, obj: Any) -> Optional[List[Any]]:
        return [obj]

    def all_gather_objects(self, obj: Any) -> List[Any]:
        return [obj]

    def close(self, finished: bool = True) -> None:
        pass

    # derived operations: the same on one rank or many

    def average_gradients(self, parameters: Iterable[torch.nn.Parameter], riders: torch.Tensor) -> torch.Tensor:
        """Average the parameters' gradients over ranks in one all-reduce of one flat buffer; `riders` (a few
        scalars, e.g. the minibatch's KL and loss) are averaged in the same call and returned."""
        if self.world_size == 1:  # (every PPO minibatch comes here: nothing to gather in one process)
            return riders
        grads = [p.grad for p in parameters if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads] + [riders.reshape(-1).to(grads[0].dtype)])
        self.all_reduce_mean_(flat)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
        return flat[offset:].to(riders.dtype)

    def standardize(self, x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
        """(x - mean) / (std + eps) with the mean and (unbiased) std of x over all ranks."""
        if self.world_size == 1:
            return (x - x.mean()) / (x.std() + eps)
        n_sum = self.sum(torch.stack([torch.tensor(float(x.numel()), dtype=torch.float64, device=x.device),
                                      x.double().sum()]))
        count, mean = n_sum[0], n_sum[1] / n_sum[0]
        squares = self.sum((x.double() - mean).pow(2).sum().reshape(1))[0]
        std = torch.sqrt(squares / (count - 1))
        return ((x - mean.to(x.dtype)) / (std.to(x.dtype) + eps))

    def merge_moments(self, count: float, mean: torch.Tensor, var: torch.Tensor) -> Tuple[float, torch.Tensor,
                                                                                           torch.Tensor]:
        """The exact (count, mean, population variance) of the union of all ranks' samples, combined in rank
        order (Chan et al.) so that every rank computes the same bits."""
        if self.world_size == 1:
            return count, mean, var
        parts = self.all_gather_objects((float(count), mean.cpu(), var.cpu()))
        total, merged_mean, merged_var = parts[0]
        for n, m, v in parts[1:]:
            delta = m - merged_mean
            combined = total + n
            m2 = merged_var * total + v * n + delta.pow(2) * total * n / combined
            merged_mean = merged_mean + delta * n / combined
            merged_var = m2 / combined
            total = combined
        return total, merged_mean.to(mean.device), merged_var.to(var.device)

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on some rank (a stop request, say)."""
        return bool(self.sum(torch.tensor([1.0 if flag else 0.0], dtype=torch.float64))[0] > 0)

    def episodes_of_all_ranks(self, info: Dict[str, Any]) -> Dict[str, Any]:
        """A batch's episode statistics over every rank's envs, each mean weighted by its episodes: the batch's
        over all the episodes that ended in it, the window's over the union of each rank's window."""
        if self.world_size == 1:
            return info

        def weighted(mean: float, count: float) -> float:
            return mean * count if count else 0.0

        episodes, window = float(info["episodes"]), float(info["window_episodes"])
        sums = self.sum(torch.tensor([
            episodes, weighted(info["batch_mean_return"], episodes), weighted(info["batch_mean_length"], episodes),
            window, weighted(info["window_mean_return"], window), weighted(info["window_mean_length"], window),
            float(info["diverged"]),
        ], dtype=torch.float64)).tolist()

        def mean(total: float, count: float) -> float:
            return total / count if count else float("nan")

        names = sorted(info.get("reward_terms", {}))  # (the same task on every rank: the same terms)
        terms = self.sum(torch.tensor([weighted(info["reward_terms"][name], episodes) for name in names],
                                      dtype=torch.float64)).tolist() if names else []
        states = sorted(info.get("task_state", {}))  # (each rank's own envs: their mean over the ranks)
        if states:
            totals = self.sum(torch.tensor([info["task_state"][name] for name in states], dtype=torch.float64))
            info = dict(info, task_state={name: total / self.world_size for name, total in zip(states, totals.tolist())})
        return dict(info, episodes=int(sums[0]), batch_mean_return=mean(sums[1], sums[0]),
                    batch_mean_length=mean(sums[2], sums[0]), window_episodes=int(sums[3]),
                    window_mean_return=mean(sums[4], sums[3]), window_mean_length=mean(sums[5], sums[3]),
                    diverged=int(sums[6]),
                    reward_terms={name: mean(total, sums[0]) for name, total in zip(names, terms)})

    def digests(self, tensors: Sequence[torch.Tensor]) -> List[str]:
        """Each rank's SHA-256 of the given tensors' bytes, in rank order: equal digests mean bit-identical state."""
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return self.all_gather_objects(h.hexdigest())


class TorchDistributed(Local):
    """A rank of a torch.distributed process group (initialised from torchrun's environment variables)."""

    def __init__(self, backend: str, device: torch.device):
        import torch.distributed as dist

        self.dist = dist
        self.backend = backend
        self.device = device
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world_size)))
        self.is_main = self.rank == 0
        if not dist.is_initialized():
            dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30))

    def _collective_device(self) -> torch.device:
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def all_reduce_mean_(self, flat: torch.Tensor) -> torch.Tensor:
        work = flat.to(self._collective_device())
        self.dist.all_reduce(work)
        work /= self.world_size
        if work is not flat:
            flat.copy_(work)
        return flat

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        work = values.to(self._collective_device()).clone()
        self.dist.all_reduce(work)
        return work.to(values.device)

    def broadcast_object(self, obj: Any) -> Any:
        box = [obj if self.is_main else None]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers (the normalisers' statistics) everywhere."""
        for tensor in list(module.parameters()) + list(module.buffers()):
            work = tensor.data.to(self._collective_device())
            self.dist.broadcast(work, src=0)
            tensor.data.copy_(work)

    def gather_objects(self, obj: Any) -> Optional[List[Any]]:
        """Every rank's obj on rank 0 (None elsewhere)."""
        out: Optional[List[Any]] = [None] * self.world_size if self.is_main else None
        self.dist.gather_object(obj, out, dst=0)
        return out

    def all_gather_objects(self, obj: Any) -> List[Any]:
        out: List[Any] = [None] * self.world_size
        self.dist.all_gather_object(out, obj)
        return out

    def close(self, finished: bool = True) -> None:
        """Tear the process group down. A rank that finished meets the others first: rank 0 evaluates and writes
        after the last collective while the others would already tear gloo down and exit, and a CI run once saw a
        rank abort there ("terminate called without an active exception", SIGABRT, after a run that had trained
        and saved; not reproduced in 42 runs since). A failed rank does not wait: the others may never arrive."""
        if self.dist.is_initialized():
            if finished:
                self.dist.barrier()
            self.dist.destroy_process_group()


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def check_cuda_device(device: str) -> None:
    """device=cuda[:N] on a machine whose torch sees no such GPU: one line naming the device, before any backend
    (MuJoCo Warp, Isaac Gym) meets it. Checked when the run starts, not with the config: a sweep for GPU nodes is
    composed and checked on a login node without one."""
    if not str(device).startswith("cuda"):
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":", 1)[1]) if ":" in device and device.split(":", 1)[1].isdigit() else 0
    if count == 0:
        build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        raise UserError(f"device={device}: this machine has no CUDA GPU that torch (torch {torch.__version__}, "
                        f"{build}) can use: drop device= (or give device=cpu) to run on the CPU")
    if index >= count:
        raise UserError(f"device={device}: this machine has {count} CUDA GPU{'s' if count > 1 else ''} "
                        f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''})")


def setup(multi_gpu: bool, device: str, backend: str) -> Tuple[Local, str]:
    """(the communicator, this rank's device). Refuses, in one line, what cannot work: multi_gpu without a
    launcher, NCCL without GPUs, more ranks on a node than it has GPUs, a CUDA device the machine does not have."""
    if not multi_gpu:
        check_cuda_device(device)
        return Local(), device
    if not launched_by_torchrun() and "SUBMITIT_EXECUTOR" in os.environ:
        # a task of a submitit job (hydra/launcher=slurm_gpu with tasks_per_node > 1): torchrun's variables
        from submitit.helpers import TorchDistributedEnvironment

        TorchDistributedEnvironment().export()
    if not launched_by_torchrun():
        raise UserError(
            "multi_gpu=true needs a process per rank: launch with `torchrun --nproc_per_node=N -m isaac_ppo.train "
            "multi_gpu=true ...` or in a SLURM job through hydra/launcher=slurm_gpu (tasks_per_node=N); "
            f"none of {', '.join(n for n in LAUNCH_VARIABLES if n not in os.environ)} is set"
        )
    wants_cuda = device.startswith("cuda")
    backend = backend if backend != "auto" else ("nccl" if wants_cuda else "gloo")
    if backend == "nccl" and not (wants_cuda and torch.cuda.is_available()):
        raise UserError(
            f"dist_backend=nccl runs on GPUs, and this process has device={device}"
            f"{'' if torch.cuda.is_available() else ' and no CUDA device'}: use dist_backend=gloo (or auto) on CPUs"
        )
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if wants_cuda:
        if not torch.cuda.is_available():
            raise UserError(f"device={device} with multi_gpu=true, but this machine has no CUDA device: use device=cpu")
        count = torch.cuda.device_count()
        if local_rank >= count:
            raise UserError(
                f"rank with LOCAL_RANK={local_rank} has no GPU: this node has {count}; start at most {count} "
                "processes per node (torchrun --nproc_per_node, or hydra.launcher.tasks_per_node)"
            )
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(local_rank)
    return TorchDistributed(backend, torch.device(device)), device
