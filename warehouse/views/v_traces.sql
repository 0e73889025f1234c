-- Traces with their text: a trace whose text is stored once for many (traces.text_id, a LongMemEval
-- session recurring across instances) reads it from trace_texts. Every reader of trace text uses this.
CREATE OR REPLACE VIEW v_traces AS
SELECT t.* REPLACE (coalesce(x.content, t.content) AS content)
FROM traces t LEFT JOIN trace_texts x ON x.text_id = t.text_id;
