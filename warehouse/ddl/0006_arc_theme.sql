-- The theme tag of a life arc (what it is about, e.g. career_change), used to draw distractors from
-- the persona's own states.
ALTER TABLE life_arcs ADD COLUMN theme VARCHAR;
