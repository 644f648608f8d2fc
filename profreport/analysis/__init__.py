"""Pure analyses over run records and trace events: no printing, plotting or file writes."""
