"""The assignment: its parts, their kernel contracts and launch plans, and the config that grades them."""
