"""The classic control tasks (Cartpole, BallBalance): a few joints, obs and reward in closed form; each task's
module declares its spec (parameter domains included) and assets/ holds its model."""
