"""The node check and the verbs that judge: compose telemetry, health, catalog and planner."""
