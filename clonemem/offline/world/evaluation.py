"""Offline answerer and judge: deterministic and meaningful. The answerer answers from the retrieved
memories only (and abstains to E when nothing supports any option); the judge measures how much of
the gold memory the answer and the retrieved text cover."""

from __future__ import annotations

from clonemem import text as textutil
from clonemem.offline import OfflineCall
from clonemem.schemas.evaluation import AnswerInput, ChoiceAnswer, FreeAnswer, JudgeInput, JudgeVerdict
from clonemem.schemas.qa import E_TEXT

PRONOUNS = frozenset({"i", "me", "my", "myself", "she", "he", "her", "his", "they", "them", "their", "我"})
# An option is chosen when most of its content is in the memories and it clearly beats the others;
# otherwise the clone abstains (E).
ANSWER_FLOOR = 0.5
ANSWER_MARGIN = 0.08
ABSTAIN = ("don't know", "do not know", "can't say", "cannot say", "never wrote", "not sure", "no record",
           "不知道", "说不准", "没有记录", "没记下")


def _words(text: str, drop: set[str] | frozenset[str] = frozenset()) -> set[str]:
    return {w for w in textutil.content_words(text) if w not in PRONOUNS and w not in drop}


def answer_free(call: OfflineCall) -> FreeAnswer:
    inp = call.inputs
    assert isinstance(inp, AnswerInput)
    q = _words(inp.question)
    ranked = sorted(((len(q & _words(m)), i, m) for i, m in enumerate(inp.memories)), key=lambda x: (-x[0], x[1]))
    useful = [m for score, _, m in ranked[:3] if score > 0]
    if not useful:
        return FreeAnswer(answer="我不知道，我的记录里没有这件事。" if inp.language == "zh"
                          else "I don't know; nothing in my records settles that.")
    sentences = []
    for memory in useful:
        best = max(textutil.sentences(memory) or [memory], key=lambda s: len(q & _words(s)))
        sentences.append(best.strip())
    return FreeAnswer(answer=" ".join(dict.fromkeys(sentences)))


def answer_choice(call: OfflineCall) -> ChoiceAnswer:
    """Pick the option most of whose content the memories contain, when it clearly beats the others;
    abstain (E) otherwise."""
    inp = call.inputs
    assert isinstance(inp, AnswerInput)
    memory = _words(" ".join(inp.memories))
    scored = []
    for c in inp.choices:
        if c.text == E_TEXT or c.id == "E":
            continue
        ws = _words(c.text)
        scored.append((len(ws & memory) / max(1, len(ws)), c.id))
    scored.sort(key=lambda x: (-x[0], x[1]))
    if scored and scored[0][0] >= ANSWER_FLOOR and (len(scored) == 1 or scored[0][0] - scored[1][0] >= ANSWER_MARGIN):
        return ChoiceAnswer(choice_id=scored[0][1], reason=f"{scored[0][0]:.0%} of option {scored[0][1]} is in my memories")
    e = next((c.id for c in inp.choices if c.text == E_TEXT), "E")
    return ChoiceAnswer(choice_id=e, reason="no option is clearly supported by my memories")


def judge(call: OfflineCall) -> JudgeVerdict:
    inp = call.inputs
    assert isinstance(inp, JudgeInput)
    gold = [_words(s) for s in inp.gold_statements]
    items = [_words(r) for r in inp.retrieved]
    answer = _words(inp.candidate_answer)
    # a gold statement is covered when one retrieved memory states most of it (not the union of many)
    covered = sum(1 for g in gold if g and any(len(g & item) / len(g) >= 0.6 for item in items))
    share = covered / len(gold) if gold else 0.0
    helpful = 2 if gold and share >= 0.8 else 1 if covered else 0
    abstains = any(a in inp.candidate_answer.lower() for a in ABSTAIN)
    if inp.question_type == "unanswerable":
        consistency = 3 if abstains else 0
    else:
        used = sum(1 for g in gold if g and len(g & answer) / len(g) >= 0.5) / max(1, len(gold))
        ref_overlap = len(answer & _words(inp.reference_answer)) / max(1, len(answer))
        if used >= 0.9:
            consistency = 3
        elif used >= 0.4:
            consistency = 2
        elif abstains or ref_overlap >= 0.2:
            consistency = 1  # generic or a safe non-answer: not grounded, not wrong
        else:
            consistency = 0  # asserts things the gold memory does not support
    return JudgeVerdict(qa_consistency=consistency, mem_covered=covered, mem_helpful=helpful,
                        reason=f"answer uses {consistency}/3; retrieved memories cover {covered}/{len(gold)} gold statements")
