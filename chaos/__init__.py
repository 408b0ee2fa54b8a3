"""ocd's chaos suite (``make chaos``): real daemons put through real faults. See run.py."""
