"""Documents brought in as notes: upload a PDF, text, markdown or Word file."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
