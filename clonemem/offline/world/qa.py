"""Stage IV offline handlers: the QA planner and writer, the sufficiency validator, the distractor
writer and the distractor validator. The writer is imperfect on purpose (it sometimes embellishes an
answer, or drafts weak distractors in a first round) and the validator really checks: it measures
what the evidence supports, and it really tries to answer from cues or from one evidence item."""

from __future__ import annotations

import json
import random
from functools import lru_cache
from importlib import resources

from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.offline.world.common import (
    archetype_of,
    fill,
    first_name,
    first_person,
    lexicon,
    persona_slots,
    pick,
)
from clonemem.schemas import question_types
from clonemem.schemas.qa import (
    ChoiceAttempt,
    ChoiceInput,
    DistractorInput,
    Distractors,
    PlanInput,
    QADraft,
    QAPlan,
    Segment,
    SegmentEvidence,
    SufficiencyInput,
    SufficiencyVerdict,
    WriteInput,
)

# the QA wording of each language: part of the QA stages' cache keys (clonemem.codehash)
CACHE_DATA = ("clonemem.offline:lexicon/qa_en.json", "clonemem.offline:lexicon/qa_zh.json")

SUFFICIENT = 0.75


@lru_cache(maxsize=4)
def qa_lexicon(language: str) -> dict:
    folder = resources.files("clonemem.offline") / "lexicon"
    name = f"qa_{language}.json" if (folder / f"qa_{language}.json").is_file() else "qa_en.json"
    return json.loads((folder / name).read_text("utf-8"))


def _month(d, qa: dict) -> str:
    return fill(qa["month_format"], {"month": qa["months"][d.month - 1], "year": str(d.year)})


def _slots(seg: Segment, rng: random.Random) -> dict[str, str]:
    return persona_slots(seg.persona, seg.relations, lexicon(seg.language), rng)


def _topic(seg: Segment, qa: dict, slots: dict[str, str]) -> str:
    return fill(qa["topics"].get(seg.arc.theme, "{hobby}"), slots)


# -- planning -----------------------------------------------------------------------------------


def _spread(evs: list[SegmentEvidence], days: int) -> bool:
    return len(evs) >= 2 and (evs[-1].date - evs[0].date).days >= days


# Evidence selection per question type; each function is named by its type's spec
# (clonemem.schemas.question_types, ``offline_evidence``) and returns (chosen, "") or ([], why-key).


def select_single_point(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    facts = [e for e in _in_window(seg) if e.kind == "fact"]
    return ([facts[-1]], "") if facts else ([], "fact")


def select_comparison(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    new = set(seg.new_evidence_ids)
    for kind in ("opinion", "emotion", "fact"):
        same = [e for e in seg.evidence if e.kind == kind]
        if (
            _spread(same, 45)
            and same[-1].statement != same[0].statement
            and same[-1].evidence_id in new
        ):
            return [same[0], same[-1]], ""
    return [], "kinds"


def select_trajectory(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    ev = seg.evidence
    if len(ev) >= 3 and _spread(ev, 60) and ev[-1].evidence_id in set(seg.new_evidence_ids):
        return [ev[0], ev[len(ev) // 2], ev[-1]], ""
    return [], "few"


def select_pattern(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    for kind in ("emotion", "fact", "opinion"):
        same = [e for e in seg.evidence if e.kind == kind]
        if _spread(same, 14):
            return [same[-2], same[-1]] if (same[-1].date - same[-2].date).days >= 14 else [
                same[0],
                same[-1],
            ], ""
    return [], "few"


def _cause_then_state(seg: Segment, gap_days: int) -> tuple[list[SegmentEvidence], str]:
    later = [e for e in _in_window(seg) if e.kind in ("emotion", "opinion")]
    for late in reversed(later):
        causes = [
            e for e in seg.evidence if e.kind == "fact" and (late.date - e.date).days >= gap_days
        ]
        if causes:
            return [causes[-1], late], ""
    return [], "kinds"


def select_causal(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    return _cause_then_state(seg, 30)


def select_counterfactual(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    return _cause_then_state(seg, 45)


def select_inferential(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    kinds: dict[str | None, SegmentEvidence] = {}
    for e in _in_window(seg):
        kinds.setdefault(e.kind, e)
    return (list(kinds.values())[:2], "") if len(kinds) >= 2 else ([], "kinds")


def select_unanswerable(seg: Segment) -> tuple[list[SegmentEvidence], str]:
    return ([seg.evidence[-1]], "") if seg.evidence else ([], "few")


def _in_window(seg: Segment) -> list[SegmentEvidence]:
    new = set(seg.new_evidence_ids)
    return [e for e in seg.evidence if e.evidence_id in new]


def plan(call: OfflineCall) -> QAPlan:
    inp = call.inputs
    assert isinstance(inp, PlanInput)
    seg, qa = inp.segment, qa_lexicon(inp.segment.language)
    chosen, why = question_types.spec(inp.question_type).offline_selector()(seg)
    slots = _slots(seg, call.rng)
    topic = _topic(seg, qa, slots)
    qtype = inp.question_type.replace("_", " ")
    if not chosen:
        return QAPlan(
            feasible=False,
            reason=fill(qa["plan_infeasible"], {"qtype": qtype, "why": qa["why"][why]}),
            evidence_ids=[],
            temporal_scope="",
            outline="",
        )
    scope = f"{chosen[0].date.isoformat()}..{chosen[-1].date.isoformat()}"
    return QAPlan(
        feasible=True,
        evidence_ids=[e.evidence_id for e in chosen],
        temporal_scope=scope,
        reason=fill(
            qa["plan_feasible"],
            {
                "n": str(len(chosen)),
                "start": chosen[0].date.isoformat(),
                "end": chosen[-1].date.isoformat(),
                "qtype": qtype,
                "topic": topic,
            },
        ),
        outline=fill(
            qa["outline"],
            {"topic": topic, "month1": _month(chosen[0].date, qa), "n": str(len(chosen))},
        ),
    )


# -- writing ------------------------------------------------------------------------------------


def _hint(statement: str, name: str, language: str, people: list[str] | None = None) -> str:
    """A conversational anchor: the people and places the statement names, else its last words."""
    body = statement.replace(name, "").strip(" .。")
    if language == "zh":
        named = [p for p in (people or []) if p in body]
        return "、".join(named[:2]) if named else "那件事"
    words = body.split()
    proper = [
        w.strip(",.'") for w in words[1:] if w[:1].isupper() and w.strip(",.'") not in name.split()
    ]
    return " ".join(dict.fromkeys(proper)) if proper else " ".join(words[-3:]) or "that"


def write(call: OfflineCall) -> QADraft:
    inp = call.inputs
    assert isinstance(inp, WriteInput)
    seg, qa, rng = inp.segment, qa_lexicon(inp.segment.language), call.rng
    lex = lexicon(seg.language)
    by_id = {e.evidence_id: e for e in seg.evidence}
    chosen = [by_id[i] for i in inp.plan.evidence_ids if i in by_id]
    slots = _slots(seg, rng)
    fill_slots = {
        **slots,
        "topic": _topic(seg, qa, slots),
        "month1": _month(chosen[0].date, qa),
        "month2": _month(chosen[-1].date, qa),
        "hint": _hint(
            chosen[0].statement,
            first_name(seg.persona, lex),
            seg.language,
            [r.name for r in seg.relations],
        ),
        "first": first_name(seg.persona, lex),
    }
    questions, answer_template = _wording(qa, inp.question_type, seg.language)
    question = fill(pick(rng, list(questions)), fill_slots)
    sentences = {
        f"s{i + 1}": first_person(e.statement, seg.persona, lex) for i, e in enumerate(chosen)
    }
    answer = fill(answer_template, {**fill_slots, **sentences})
    if not question_types.spec(inp.question_type).abstains and rng.random() < 0.12:
        # the writer sometimes adds what the evidence never said; the sufficiency check must catch it
        answer = answer + ("" if seg.language == "zh" else " ") + pick(rng, qa["embellishments"])
    return QADraft(question=question, answer=answer)


# -- sufficiency --------------------------------------------------------------------------------


def _wording(qa: dict, qtype: str, language: str) -> tuple[tuple[str, ...], str]:
    """A type's question templates and answer template: its own declaration's, else the QA lexicon's."""
    spec = question_types.spec(qtype)
    if language in spec.offline_questions and language in spec.offline_answer:
        return spec.offline_questions[language], spec.offline_answer[language]
    return tuple(qa["questions"][qtype]), qa["answers"][qtype]


def _template_words(qa: dict, language: str = "en") -> set[str]:
    words: set[str] = set(w.lower() for w in qa["months"])
    templates = [
        *qa["answers"].values(),
        *(question_types.spec(n).offline_answer.get(language, "") for n in question_types.names()),
    ]
    for template in templates:
        words |= set(textutil.content_words(template.replace("{", " ").replace("}", " ")))
    return words


def sufficiency(call: OfflineCall) -> SufficiencyVerdict:
    inp = call.inputs
    assert isinstance(inp, SufficiencyInput)
    qa = qa_lexicon(inp.language)
    name_words = {w.lower() for w in inp.persona_name.split()} | {"i", "me", "my"}
    evidence_words = set(textutil.content_words(" ".join(inp.evidence)))
    if question_types.spec(inp.question_type).abstains:
        asked = (
            set(textutil.content_words(inp.question))
            - name_words
            - _template_words(qa, inp.language)
        )
        settled = len(asked & evidence_words) / max(1, len(asked))
        ok = settled < 0.5
        return SufficiencyVerdict(
            verdict="sufficient" if ok else "insufficient",
            score=round(1 - settled, 3),
            reason=qa["unanswerable_ok" if ok else "unanswerable_bad"],
        )
    # sentence by sentence: one unsupported sentence is enough to make the answer insufficient
    skip = name_words | _template_words(qa, inp.language)
    coverages = []
    for sentence in textutil.sentences(inp.answer):
        claimed = [w for w in textutil.content_words(sentence) if w not in skip]
        if len(claimed) >= 2:
            coverages.append(sum(w in evidence_words for w in claimed) / len(claimed))
    covered = min(coverages, default=1.0)
    ok = covered >= SUFFICIENT
    return SufficiencyVerdict(
        verdict="sufficient" if ok else "insufficient",
        score=round(covered, 3),
        reason=fill(qa["sufficient" if ok else "insufficient"], {"covered": covered}),
    )


# -- distractors --------------------------------------------------------------------------------


def _alternatives(inp: DistractorInput, rng: random.Random) -> list[str]:
    """Statements true of this persona at other times or on neighbouring arcs, in the evidence's forms
    (facts, feelings about an activity, opinions), in the persona's voice."""
    lex = lexicon(inp.language)
    # Chinese options name the persona's people (the lexicon has no generic stand-in); English ones keep
    # the generic "a friend" they were calibrated with (cue statistics measured on three seeds)
    slots = persona_slots(inp.persona, inp.relations if inp.language == "zh" else [], lex, rng)
    out = []
    for arc in [inp.arc, *inp.other_arcs]:
        arche = archetype_of(arc.theme, lex)
        activities = lex.domain_activities.get(arche.domain, lex.domain_activities["hobby"])
        for st in arche.states:
            out += [fill(f, slots) for f in st.facts]
            out += [fill(lex.s("evidence_opinion"), {**slots, "belief": b}) for b in st.beliefs]
            for feeling in st.feelings:
                context = (
                    slots["subj"]
                    + ("" if lex.language == "zh" else " ")
                    + fill(pick(rng, activities), slots)
                )
                out.append(
                    fill(
                        lex.s("evidence_emotion"), {**slots, "feeling": feeling, "context": context}
                    )
                )
    evidence = set(inp.evidence)
    seen, unique = set(), []
    for s in out:
        s = s if s.endswith((".", "。")) else s + ("。" if lex.language == "zh" else ".")
        if s not in evidence and s not in seen:
            seen.add(s)
            unique.append(first_person(s, inp.persona, lex))
    rng.shuffle(unique)
    return unique


def _like(
    sentence: str, pool: list[str], used: set[str], rng: random.Random, question: set[str]
) -> str:
    """A pool statement of about the same length as ``sentence`` that shares the question's words as
    much as the answer may: neither length nor word overlap may give the answer away."""
    free = [p for p in pool if p not in used] or pool
    close = [p for p in free if abs(len(p) - len(sentence)) <= 0.2 * len(sentence)]
    close = close or sorted(free, key=lambda p: abs(len(p) - len(sentence)))[:6]

    def shared(p: str) -> float:
        ws = set(textutil.content_words(p))
        # Chinese bigrams make long sentences share more words: count per word there
        return len(question & ws) / max(1, len(ws)) if per_word else len(question & ws)

    per_word = any("\u4e00" <= ch <= "\u9fff" for ch in sentence)
    best = max(shared(p) for p in close)
    tied = [p for p in close if shared(p) == best]
    if per_word:
        nearest = min(abs(len(p) - len(sentence)) for p in tied)
        tied = [p for p in tied if abs(len(p) - len(sentence)) == nearest]
    choice = pick(rng, tied)
    used.add(choice)
    return choice


def distractors(call: OfflineCall) -> Distractors:
    inp = call.inputs
    assert isinstance(inp, DistractorInput)
    rng = call.rng
    lex = lexicon(inp.language)
    pool = _alternatives(inp, random.Random(rng.random()))
    own = [first_person(s, inp.persona, lex) for s in inp.evidence]
    # a first draft is sometimes weak: too short, or with no partial truth to compete with the answer
    defect = (
        None if inp.round > 1 or inp.feedback else rng.choice([None, None, "short", "no_partial"])
    )
    options = []
    used: set[str] = set()
    question = set(textutil.content_words(inp.question))
    abstains = question_types.spec(inp.question_type).abstains
    for j in range(inp.count):
        if abstains:
            target = " ".join(own) if own else inp.answer
            joiner = "" if inp.language == "zh" else " "
            text = joiner.join(
                _like(target[: len(target) // 2], pool, used, rng, question) for _ in range(2)
            )
        else:
            parts = [_like(sentence, pool, used, rng, question) for sentence in own]
            if j == 0 and len(own) >= 2 and defect != "no_partial":
                parts[-1] = own[-1]  # the persona's true latest state, with a wrong story before it
            if j == 1 and len(own) >= 2 and defect != "no_partial":
                parts[0] = own[0]  # the true earlier state presented as if nothing changed
            text = _recompose(inp.answer, own, parts)
            if defect == "short":
                text = parts[0]
        options.append(text)
    return Distractors(options=options)


def _recompose(answer: str, own: list[str], parts: list[str]) -> str:
    """The answer's own frame (its connective words) around other statements: same form, same length."""
    out = answer
    for mine, theirs in zip(own, parts):
        out = out.replace(mine, theirs, 1)
    return (
        out
        if out != answer
        else ("" if any("\u4e00" <= ch <= "\u9fff" for ch in answer) else " ").join(parts)
    )


# -- the distractor validator -------------------------------------------------------------------


def check_choice(call: OfflineCall) -> ChoiceAttempt:
    inp = call.inputs
    assert isinstance(inp, ChoiceInput)
    qa, rng = qa_lexicon(inp.language), call.rng
    options = [c for c in inp.choices if c.text != qa["abstain"] and c.id != "E"]
    if inp.mode == "blind":
        lengths = sorted(((len(c.text), c.id) for c in options), reverse=True)
        if len(lengths) > 1 and lengths[0][0] >= 1.35 * lengths[1][0]:
            return ChoiceAttempt(
                choice_id=lengths[0][1],
                confidence=0.8,
                reason=fill(qa["blind_reason_length"], {"choice": lengths[0][1]}),
            )
        q = set(textutil.content_words(inp.question))
        overlaps = sorted(
            ((len(q & set(textutil.content_words(c.text))), c.id) for c in options), reverse=True
        )
        if len(overlaps) > 1 and overlaps[0][0] >= overlaps[1][0] + 2:
            return ChoiceAttempt(
                choice_id=overlaps[0][1],
                confidence=0.7,
                reason=fill(qa["blind_reason_overlap"], {"choice": overlaps[0][1]}),
            )
    else:
        ev = set(textutil.content_words(inp.evidence or ""))
        scores = sorted(
            (
                (len(ev & set(textutil.content_words(c.text))) / max(1, len(ev)), c.id)
                for c in options
            ),
            reverse=True,
        )
        if len(scores) > 1 and scores[0][0] >= 0.6 and scores[0][0] - scores[1][0] >= 0.25:
            return ChoiceAttempt(
                choice_id=scores[0][1],
                confidence=0.8,
                reason=fill(qa["single_reason"], {"choice": scores[0][1]}),
            )
    guess = pick(rng, [c.id for c in options])
    return ChoiceAttempt(
        choice_id=guess, confidence=round(1 / max(1, len(options)), 3), reason=qa["guess_reason"]
    )
