"""Household administration and your own account: people, passwords, sessions, trash, models."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
