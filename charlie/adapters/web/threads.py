"""Threads: the many conversations of a project or of a private channel."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
