"""Question inspector: one question with its options and evidence, and what each evaluated system
retrieved at k (gold traces marked), answered, chose, how the judge scored it and where it failed
(write, read or use), and its scores under the benchmark's standard protocols; the questions can be
narrowed to those a chosen system failed."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl
import streamlit as st

from clonemem.dashboard import analysis as A
from clonemem.dashboard import charts, exchanges
from clonemem.dashboard import queries as Q
from clonemem.dashboard.context import Session, pick_run, run_page
from clonemem.dashboard.producers import EvalModels, models_of

TITLE = "Question inspector"


def render(session: Session) -> None:
    db, bench = session.db, session.benchmark
    evaluation = _evaluation(session, bench["benchmark_id"])
    question_id = _pick(session, evaluation)
    if question_id is None:
        return
    q = Q.question(db, question_id).row(0, named=True)
    st.markdown(
        f"**{q['person_name']}** · {q['question_type']}"
        + (
            f" (source: {q['source_question_type']})"
            if q["source_question_type"] and q["source_question_type"] != q["question_type"]
            else ""
        )
        + f" · {q['dimension']} · asked {q['question_time']:%Y-%m-%d %H:%M}"
        + (f" · life arc: {q['life_arc']}" if q["life_arc"] else "")
    )
    st.markdown("**Question**")
    st.text(q["question"])
    st.markdown("**Reference answer**")
    st.text(q["answer"])
    if q["adversarial_answer"]:
        st.caption(f"adversarial (trap) answer: {q['adversarial_answer']}")
    choices = Q.question_choices(db, question_id)
    if choices.height:
        st.markdown(f"**Options** (correct: {q['correct_choice_id']})")
        # a static table wraps each option in full: options sharing a long prefix stay distinguishable
        st.table(choices)
    else:
        st.caption("Free-text only: no options.")
    _evidence(session, question_id)
    _systems(session, question_id, evaluation)


def _evaluation(session: Session, bid: str) -> tuple[str, int] | None:
    """The evaluation and k the page shows (and the failure filter reads), or None if there is none."""
    runs = Q.eval_runs(session.db, bid)
    if runs.height == 0:
        return None
    left, right = st.columns([3, 1])
    eval_run_id, _labels = pick_run(
        runs, "eval_run_id", "systems", "Evaluation", key="qi_eval", where=left
    )
    ks = _ks(runs.filter(pl.col("eval_run_id") == eval_run_id)["ks"][0])
    if not ks:
        return None
    k = right.selectbox("k", ks, key=f"qi_k_{eval_run_id}")
    return eval_run_id, k


def _pick(session: Session, evaluation: tuple[str, int] | None) -> str | None:
    db, bid = session.db, session.benchmark["benchmark_id"]
    people = Q.personas(db, bid)
    requested = st.query_params.get("question")
    left, mid, sys_col, fail_col = st.columns(4)
    persona_names = {r["persona_id"]: r["person_name"] for r in people.iter_rows(named=True)}
    persona_id = left.selectbox(
        "Persona",
        [None, *persona_names],
        key="qi_persona",
        format_func=lambda p: "all" if p is None else persona_names[p],
    )
    types = sorted(Q.composition(db, bid)["question_type"].unique().to_list())
    qtype = mid.selectbox(
        "Question type",
        [None, *types],
        key="qi_type",
        format_func=lambda t: "all" if t is None else t,
    )
    index = Q.question_index(db, bid, persona_id, qtype)
    if evaluation is not None:
        eval_run_id, k = evaluation
        systems = Q.eval_systems(db, eval_run_id)["system"].to_list()
        system = sys_col.selectbox(
            "Failed by system",
            [None, *systems],
            key="qi_failed_system",
            format_func=lambda s: "any (no filter)" if s is None else s,
        )
        failure = fail_col.selectbox(
            "Failure", list(Q.FAILURES), key="qi_failure", disabled=system is None
        )
        if system is not None:
            failed = Q.failed_questions(db, eval_run_id, system, k, failure)["question_id"]
            index = index.filter(pl.col("question_id").is_in(failed.to_list()))
            st.caption(
                f"{index.height:,} question(s) {system} {failure.replace('wrong', 'got wrong')} at k = {k} "
                "in this evaluation."
            )
    if index.height == 0:
        st.info("No questions match.")
        return None
    ids = index["question_id"].to_list()
    if requested:
        if requested in ids:
            st.session_state["qi_question"] = requested
        else:
            external = index.filter(pl.col("external_id") == requested)
            if external.height:
                st.session_state["qi_question"] = external["question_id"][0]
            else:
                st.warning(f"no question {requested!r} among these; showing the first instead")
    if st.session_state.get("qi_question") not in ids:
        st.session_state["qi_question"] = ids[0]
    labels = {
        r[
            "question_id"
        ]: f"{i + 1}. {r['external_id'][:12]} · {r['question_type']} · {r['question'][:90]}"
        for i, r in enumerate(index.iter_rows(named=True))
    }
    return st.selectbox(
        f"Question ({len(ids):,})", ids, format_func=labels.__getitem__, key="qi_question"
    )


def _evidence(session: Session, question_id: str) -> None:
    evidence = Q.question_evidence(session.db, question_id)
    st.markdown(
        f"**Evidence** ({evidence['evidence'].n_unique() if evidence.height else 0} statements)"
    )
    if evidence.height == 0:
        st.caption("This question names no evidence.")
        return
    for (seq, statement), part in evidence.group_by(["evidence", "statement"], maintain_order=True):
        traces = part.filter(pl.col("trace_id").is_not_null())
        with st.expander(f"{seq + 1}. {statement}  ({traces.height} trace(s))"):
            if traces.height == 0:
                st.caption("This evidence item names no trace (recall metrics skip it).")
            for r in traces.iter_rows(named=True):
                st.caption(f"{r['medium']} · {r['event_date']:%Y-%m-%d %H:%M} · {r['external_id']}")
                st.text(r["content"])


def _systems(session: Session, question_id: str, evaluation: tuple[str, int] | None) -> None:
    db = session.db
    st.subheader("Evaluated systems")
    if evaluation is None:
        if Q.eval_runs(db, session.benchmark["benchmark_id"]).height:
            st.info("This evaluation recorded no metrics.")
        else:
            st.info(
                f"Benchmark {session.benchmark['name']!r} has not been evaluated: "
                f"`clonemem evaluate {session.benchmark['name']} --systems bm25,random --k 5,10`."
            )
        return
    eval_run_id, k = evaluation
    models = models_of(db, eval_run_id, session.columns("eval_runs"))
    gold = set(Q.question_gold_traces(db, question_id)["trace_id"].to_list())
    retrievals = Q.question_retrievals(db, eval_run_id, question_id)
    table = A.retrieval_table(retrievals, gold, k)
    summary = A.retrieval_summary(table, retrievals["system"].to_list(), gold)
    answers = Q.question_answers(db, eval_run_id, question_id).filter(pl.col("k") == k)
    judged = Q.question_judgments(db, eval_run_id, question_id).filter(pl.col("k") == k)
    diagnosis = Q.question_scores(db, eval_run_id, question_id).filter(pl.col("k") == k).drop("k")
    scores = (
        judged.pivot(on="metric", index="system", values="score")
        if judged.height
        else pl.DataFrame({"system": []}, schema={"system": pl.Utf8})
    )
    overview = (
        summary.join(
            answers.select("system", "predicted_choice_id", "correct", "context_tokens"),
            on="system",
            how="left",
        )
        .join(diagnosis, on="system", how="left")
        .join(scores, on="system", how="left")
    )
    if models.banner():
        st.warning(models.banner())
    st.markdown(
        f"**At k = {k}**: gold traces found, the choice made, where the system failed (diagnosis: "
        f"the first failing step, write, read or use, else correct) and the judge's scores "
        f"({len(gold)} gold trace(s))"
    )
    shown = {
        c: models.label(c)
        for c in overview.columns
        if c in ("diagnosis", *scores.columns) and c != "system"
    }
    if models.answerer_offline:
        shown.update(
            {
                "predicted_choice_id": "predicted_choice_id (offline answerer)",
                "correct": "correct (offline answerer)",
            }
        )
    st.dataframe(overview.rename(shown), hide_index=True)
    if table.height:
        labels_of = Q.trace_labels(db, table["trace_id"].unique().to_list())
        ranked = table.join(labels_of, on="trace_id", how="left").sort("system", "rank")
        st.markdown(
            "**Retrieved at k** (gold marked; each cell names the trace by its id in the source file)"
        )
        st.altair_chart(charts.retrieved(ranked))
        st.dataframe(
            ranked.select(
                "system", "rank", "gold", "external_id", "medium", "event_date", "excerpt"
            ),
            hide_index=True,
            height=320,
        )
    _answers(answers, models)
    _protocols(session, eval_run_id, question_id, k, models)
    unscored = judged.filter(~pl.col("scored"))
    judge = " (offline judge)" if models.judge_offline else ""
    with st.expander(f"Judge verdicts{judge} ({unscored.height} unscored)"):
        st.dataframe(judged, hide_index=True)
    _exchanges(session, eval_run_id, question_id, k)


def _protocols(
    session: Session, eval_run_id: str, question_id: str, k: int, models: EvalModels
) -> None:
    """The question's scores under the benchmark's standard protocols (LoCoMo's F1, mem0's F1 /
    BLEU-1 / J, LongMemEval's judged accuracy and retrieval, PersonaMem's accuracy): answer scores
    at k with the answer each protocol scored, retrieval scores at every cut-off."""
    if session.db is None or not session.columns("eval_protocol_scores"):
        return  # a warehouse from before migration 0024
    scores = Q.question_protocol_scores(session.db, eval_run_id, question_id)
    scores = scores.filter((pl.col("granularity") != "qa") | (pl.col("k") == k))
    if scores.height == 0:
        return
    by = [
        who
        for who, offline in (
            ("offline answerer", models.answerer_offline),
            ("offline judge", models.judge_offline),
        )
        if offline
    ]
    st.markdown(
        f"**Standard protocols**{' (' + ', '.join(by) + ')' if by else ''}: answer scores "
        f"at k = {k} (granularity qa), retrieval scores at each cut-off k"
    )
    index = ["protocol", "system", "granularity", "k", "answer_text", "judge_label"]
    wide = scores.pivot(on="metric", index=index, values="value", aggregate_function="first")
    st.dataframe(wide.rename({"answer_text": "answer scored"}), hide_index=True)
    unscored = scores.filter(pl.col("value").is_null())
    if unscored.height:
        with st.expander(f"Unscored protocol metrics ({unscored.height})"):
            shown = unscored.select("protocol", "system", "granularity", "k", "metric", "reason")
            st.dataframe(shown, hide_index=True)


def _exchanges(session: Session, eval_run_id: str, question_id: str, k: int) -> None:
    """The LLM exchanges behind these figures: each system's answerer and judge calls for this question at k
    (and its retrieval step's), with the prompt and reply where stored."""
    st.markdown(
        f"**LLM exchanges at k = {k}** (answerer, judge, and the retrieval step's support checks)"
    )
    calls = Q.question_calls(session.db, eval_run_id, question_id, k, session.columns("llm_calls"))
    if calls.height == 0:
        st.caption(
            "No LLM call of this evaluation is labelled with this question (calls are labelled since "
            "migration 0018; a results file's given answers make none)."
        )
        return
    if not calls["this_run"].all():
        st.caption(
            "Some steps were served from the cache: their calls are those of the earlier run that made them."
        )
    for r in calls.iter_rows(named=True):
        made = "" if r["this_run"] else f" · made by run {r['run_id'][:8]}"
        with st.expander(f"{r['system']} · {r['stage']} ({r['model']}) · {r['outcome']}{made}"):
            exchanges.show(r["prompt_text"], r["response_text"], r["error"])


def _answers(answers: pl.DataFrame, models: EvalModels) -> None:
    """Each system's answer in full (wrapped text, not a table cell cut at its width)."""
    by = " (offline answerer)" if models.answerer_offline else ""
    with st.expander(f"Answers in full{by}"):
        if answers.height == 0:
            st.caption("No answers stored for this question at this k.")
        for r in answers.iter_rows(named=True):
            verdict = "" if r["correct"] is None else (" (correct)" if r["correct"] else " (wrong)")
            st.markdown(
                f"**{r['system']}** chose {r['predicted_choice_id'] or 'no option'}{verdict} · "
                f"{r['context_tokens'] if r['context_tokens'] is not None else '?'} context tokens"
            )
            st.text(r["answer_text"] or "(no answer text)")


def _ks(value: object) -> list[int]:
    if value is None:
        return []
    items = value.to_list() if isinstance(value, pl.Series) else value
    if not isinstance(items, Iterable):
        raise TypeError(f"k values must be a list, got {type(items).__name__}")
    return [int(k) for k in items]


if __name__ == "__main__":
    run_page(
        TITLE,
        render,
        about="One question end to end: evidence, traces, and every system's retrieval, "
        "answer, choice and judge scores.",
    )
