// Anchor translation unit that owns the precompiled header.
