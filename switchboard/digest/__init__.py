"""The handoff digest page: a section of the project console (admins)."""
