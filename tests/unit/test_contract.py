"""The shared input checks of the VecEnv contract (isaac_ppo.envs.contract)."""
from __future__ import annotations

import math
import re

import pytest
import torch

from isaac_ppo.envs.contract import (
    check_actions,
    check_active,
    check_num_envs,
    nonfinite_rows,
    supports_active,
)
from isaac_ppo.errors import InputError, UserError

N, A = 4, 3


def _named_env_ids(message: str):
    """The env ids an InputError message lists after 'env ids:'."""
    match = re.search(r"env ids: (.*)$", message)
    assert match, message
    return [part.strip() for part in match.group(1).split(",")]


# ---------------------------------------------------------------------------------------------- check_actions


@pytest.mark.parametrize(
    "shape",
    [
        (N * A,),  # 1-D
        (A,),  # 1-D, one env's worth
        (N - 1, A),  # wrong n
        (N + 1, A),  # wrong n
        (N, A - 1),  # wrong num_actions
        (N, A + 1),  # wrong num_actions
        (N, A, 1),  # 3-D
        (A, N),  # transposed
    ],
)
def test_check_actions_wrong_shape_names_expected_shape(shape):
    with pytest.raises(InputError) as info:
        check_actions(torch.zeros(shape), N, A)
    message = str(info.value)
    assert "(4, 3)" in message
    assert str(tuple(shape)) in message  # and what it got


def test_input_error_is_user_error_and_value_error():
    with pytest.raises(ValueError):
        check_actions(torch.zeros(N), N, A)
    with pytest.raises(UserError):
        check_actions(torch.zeros(N), N, A)


def test_check_actions_nonfinite_rows_named_exactly():
    actions = torch.zeros(N, A)
    actions[1, 2] = math.nan
    actions[3, 0] = math.inf
    with pytest.raises(InputError) as info:
        check_actions(actions, N, A)
    message = str(info.value)
    assert "2 env(s)" in message
    assert _named_env_ids(message) == ["1", "3"]


def test_check_actions_negative_infinity_refused():
    actions = torch.ones(N, A)
    actions[0, 1] = -math.inf
    with pytest.raises(InputError) as info:
        check_actions(actions, N, A)
    assert _named_env_ids(str(info.value)) == ["0"]


def test_check_actions_many_bad_rows_are_truncated():
    n = 12
    actions = torch.full((n, A), math.nan)
    with pytest.raises(InputError) as info:
        check_actions(actions, n, A)
    message = str(info.value)
    assert "12 env(s)" in message
    assert _named_env_ids(message) == [str(i) for i in range(10)] + ["..."]


def test_check_actions_huge_finite_actions_accepted():
    actions = torch.full((N, A), 3e38)  # finite in float32, but the sum overflows to inf
    assert not torch.isfinite(actions.sum())
    out = check_actions(actions, N, A)
    assert out.shape == (N, A)
    assert torch.equal(out, actions)


def test_check_actions_float_passthrough():
    actions = torch.randn(N, A)
    out = check_actions(actions, N, A)
    assert out.dtype == torch.float32
    assert torch.equal(out, actions)


def test_check_actions_integer_actions_become_float():
    actions = torch.arange(N * A, dtype=torch.long).reshape(N, A)
    out = check_actions(actions, N, A)
    assert out.is_floating_point()
    assert out.shape == (N, A)
    assert torch.equal(out, actions.float())


def test_check_actions_accepts_nested_lists():
    out = check_actions([[0.5, -0.5, 1.0]] * N, N, A)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == torch.float32
    assert torch.equal(out, torch.tensor([[0.5, -0.5, 1.0]] * N))


def test_check_actions_nested_lists_with_nan_refused():
    rows = [[0.0] * A for _ in range(N)]
    rows[2][1] = float("nan")
    with pytest.raises(InputError) as info:
        check_actions(rows, N, A)
    assert _named_env_ids(str(info.value)) == ["2"]


# --------------------------------------------------------------------------------------------- nonfinite_rows


def test_nonfinite_rows_exact_indices():
    x = torch.zeros(6, A)
    x[1, 0] = math.nan
    x[3, 2] = math.inf
    x[4, 1] = -math.inf
    rows = nonfinite_rows(x)
    assert rows.dtype == torch.long
    assert rows.tolist() == [1, 3, 4]


def test_nonfinite_rows_all_finite_is_empty():
    rows = nonfinite_rows(torch.randn(5, A))
    assert rows.numel() == 0
    assert rows.dtype == torch.long


def test_nonfinite_rows_huge_finite_is_empty():
    assert nonfinite_rows(torch.full((N, A), 3e38)).numel() == 0


def test_nonfinite_rows_huge_finite_plus_one_nan():
    x = torch.full((N, A), 3e38)
    x[2, 2] = math.nan
    assert nonfinite_rows(x).tolist() == [2]


# --------------------------------------------------------------------------------------- num_envs and active


@pytest.mark.parametrize("value", [1, 8, 4096])
def test_check_num_envs_accepts_positive_ints(value):
    assert check_num_envs(value) == value


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "4", None])
def test_check_num_envs_refuses(value):
    with pytest.raises(InputError) as info:
        check_num_envs(value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("n", [1, 4, 8])
def test_check_active_accepts_bounds(n):
    assert check_active(n, 8) == n


@pytest.mark.parametrize("n", [0, 9, -1, True, 2.0, "2"])
def test_check_active_refuses(n):
    with pytest.raises(InputError) as info:
        check_active(n, 8)
    assert "(8)" in str(info.value)


# ------------------------------------------------------------------------------------------- supports_active


def test_supports_active():
    class WithSetActive:
        def set_active(self, n):
            return n

    class Without:
        pass

    class NotCallable:
        set_active = 3

    assert supports_active(WithSetActive()) is True
    assert supports_active(Without()) is False
    assert supports_active(NotCallable()) is False


def test_numpy_integers_are_accepted_as_counts():
    import numpy as np

    from isaac_ppo.envs.contract import check_active, check_num_envs

    assert check_num_envs(np.int64(4)) == 4 and type(check_num_envs(np.int64(4))) is int
    assert check_active(np.int32(2), 4) == 2
