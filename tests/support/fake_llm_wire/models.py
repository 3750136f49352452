"""What the fake LLM lists as models (Anthropic/OpenAI and Gemini shapes), and each
API's error body for a scripted error turn."""
from __future__ import annotations


def model_obj(mid: str) -> dict:
    # A union of the Anthropic and OpenAI model-object shapes.
    return {"id": mid, "object": "model", "type": "model", "created": 1735689600,
            "owned_by": "capfleet-fake", "display_name": mid,
            "created_at": "2025-01-01T00:00:00Z"}


def gemini_model_obj(name: str) -> dict:
    return {"name": f"models/{name}", "version": "001", "displayName": name,
            "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens", "streamGenerateContent"]}


def error_body(api: str, err: dict) -> dict:
    msg = err.get("message", "scripted error")
    if api == "anthropic":
        return {"type": "error", "error": {"type": err.get("type", "api_error"), "message": msg}}
    if api == "gemini":
        return {"error": {"code": err.get("status", 500), "message": msg,
                          "status": err.get("type", "INTERNAL")}}
    return {"error": {"message": msg, "type": err.get("type", "server_error"), "code": None}}
