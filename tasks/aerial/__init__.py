"""The flying tasks (Quadcopter, Ingenuity): actuation by forces on bodies (rotor thrust through MuJoCo's
xfrc_applied); common.py holds what they share, each task's module declares its spec and assets/ holds its model."""
