"""llm: what the chat-completion backends of generate and judge share: the HTTP client with its
one error family (ragrig.llm.http) and the redaction of secrets from every model output and
error (ragrig.llm.redact)."""
