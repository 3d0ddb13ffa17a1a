"""`gpuwarden fleet`: what a fleet's GPUs did, from Prometheus (or VictoriaMetrics).

``prometheus`` is the only code that speaks to the server (through ``gpuwarden.transport``),
``queries`` holds every PromQL expression, ``collect`` reads a window into ``FleetData`` (aggregated
server-side), and the analysis (``analyze`` and the modules it calls) is pure: numbers in, a
``FleetReport`` out.
"""
