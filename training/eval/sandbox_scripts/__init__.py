"""Scripts the verifier runs inside a trial's sandbox, where opencomposer itself is not
importable: each is standalone (the standard library, and pytest for the exit guard)."""
