"""Page-specific controls, one module per page topic: each draws its page's URL-bound widgets (through the ``ui``
control helpers) and returns a frozen settings object, so a page script reads its settings in one call."""
