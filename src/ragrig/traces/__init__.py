"""`ragrig traces`: a deterministic sample of a RAG service's logged interactions judged per time
window, with intervals, alerts on the floors and drift against a reference window."""
