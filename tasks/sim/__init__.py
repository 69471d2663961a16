"""The simulator adapters beneath every MuJoCo task: mujoco.batch on the CPU (batch.py) and MuJoCo Warp (warp.py).
A task's semantics never names a simulator; tasks/base.py picks the adapter from sim=."""
