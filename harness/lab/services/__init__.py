"""The real stack as supervised processes (local) or containers (docker)."""
