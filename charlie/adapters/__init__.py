"""Front ends. Each imports the core; the core never imports them; they never import each other."""
