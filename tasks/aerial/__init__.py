"""The flying tasks (Quadcopter): actuation by forces on bodies (rotor thrust through MuJoCo's xfrc_applied);
each task's module declares its spec and assets/ holds its model."""
