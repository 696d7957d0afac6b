"""Online placement simulation (online): pods arriving one at a time, scored by policy."""
