"""python -m isaac_ppo.lab.report: the same command as isaac-ppo-report."""
import sys

from isaac_ppo.lab.report import main


if __name__ == "__main__":
    sys.exit(main())
