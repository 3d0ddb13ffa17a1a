"""Names of the JSON documents that one layer writes and another reads back.

`report` writes them; `remediate` reads them as its findings input. Both take the name from here
so that a new version of a document cannot be written under one name and read under another.
Documents only one layer knows keep their name next to the code that writes them."""

from __future__ import annotations

DOCTOR_SCHEMA = "gpuwarden.doctor/1"
FLEET_SCHEMA = "gpuwarden.fleet/1"
