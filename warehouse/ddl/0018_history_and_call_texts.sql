-- Readable LLM calls: what each call was about and, where the config's [logging] store_calls allows it
-- (by default for the offline provider only), the exchange itself. `item` is a JSON object naming the
-- call's subject (for evaluation: {"question_id", "system", "k"}; NULL where a step names none);
-- `prompt_text` is the last attempt's conversation as a JSON list of {"role", "content"} (system prompt
-- first), `response_text` the model's last reply. Never a key or a header. NULL for older calls.
ALTER TABLE llm_calls ADD COLUMN item JSON;
ALTER TABLE llm_calls ADD COLUMN prompt_text VARCHAR;
ALTER TABLE llm_calls ADD COLUMN response_text VARCHAR;
-- History: the digest of an evaluation's inputs (benchmark content, systems, k, config, provenance) and
-- results. An evaluation whose fingerprint equals the latest stored one of its benchmark is not landed
-- again: the earlier evaluation stands for it (clonemem/evaluation/land.py). NULL for older evaluations.
ALTER TABLE eval_runs ADD COLUMN fingerprint VARCHAR;
