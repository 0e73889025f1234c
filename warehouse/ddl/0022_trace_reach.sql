-- Who each trace reached, stored with it: relation names, or ["*"] (everyone); [] = nobody but the persona.
-- Generation writes it (from the trace's medium and audience, clonemem/privacy.py) and the release format
-- carries it (a context entry's `reached`), so a benchmark exported and imported again keeps its privacy
-- boundaries. NULL: not stored (a trace landed before this column, or imported without it): derived
-- from the audience and the persona's relations, as before.
ALTER TABLE traces ADD COLUMN reached JSON;
