"""The ground floor: errors, config sections, table schemas, atomic io, registry, progress, text."""
