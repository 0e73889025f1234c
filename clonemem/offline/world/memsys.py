"""Offline handlers for the LLM steps of Mem0, A-Mem and O-Mem (``clonemem.memory.memsys_stages``).

They do each step's job from the step's inputs alone, extractively and deterministically (``call.rng``
only breaks exact ties). Every step receives a group of consecutive traces (or their facts/notes) and
works through it in order, as a model reading the group top to bottom would:

* statements are the sentences of a trace that the writer says about themselves (first person, the
  writer's own lines of a chat, their calendar entries and searches), lightly normalised: hashtags,
  bullets and discourse lead-ins ("Also,", "Small update:") removed. A turn of a recorded
  conversation (``conversation_turn``, e.g. LoCoMo, or a chat in which the writer never speaks) has no
  single writer: each speaker's informative
  statements are kept, attributed ("Melanie: I painted a lake sunrise."), including elliptical ones
  ("Researching adoption agencies.") and shared photos; questions and pleasantries are not facts;
* update decisions compare a new statement with the candidate memories *about the same subject* by
  word overlap (Jaccard over content words, pronouns and contractions left out): a near-duplicate
  changes nothing, the same subject with changed content updates the memory, an explicit reversal
  ("no longer", "不再") of a memory deletes it (Mem0) or updates it (O-Mem, which has no delete),
  anything else is added; memories added earlier in the same reply are candidates too;
* notes take their keywords, context sentence and tags from the text (frequent content words, the lead
  statement, a small domain lexicon, hashtags and the medium); evolution merges the new note's thematic
  tags and context into the neighbours it was linked to;
* O-Mem's extraction separates persona attributes (opinions, beliefs, preferences, traits, present
  feelings) from event facts, and names topics by the most salient content-word phrase.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator

from clonemem import text as tx
from clonemem.offline import OfflineCall
from clonemem.schemas.config import DIALOGUE_MEDIA
from clonemem.schemas.memsys import (
    GROUP_ITEMS,
    AMemEvolution,
    AMemEvolveIn,
    AMemLinks,
    AMemLinkSet,
    AMemLinksIn,
    AMemNeighbourUpdate,
    AMemNote,
    AMemNoteIn,
    AMemNotes,
    AMemNoteView,
    Mem0ExtractIn,
    Mem0Fact,
    Mem0Facts,
    Mem0Operation,
    Mem0Operations,
    Mem0UpdateIn,
    MemoryEntry,
    OMemExtractIn,
    OMemExtraction,
    OMemExtractions,
    OMemRoute,
    OMemRouteIn,
    OMemRoutes,
    TraceView,
)

# Word-overlap thresholds of the update decisions (Jaccard over content words).
NEAR_DUPLICATE = 0.8
SAME_SUBJECT = 0.5
MIN_SHARED = 2  # content words two different statements must share to be about the same thing
# A-Mem link generation: shared keywords, or overlapping content.
LINK_SHARED_KEYWORDS = 2
LINK_OVERLAP = 0.25
MAX_TAGS = 8  # a note keeps "several" tags (A-Mem); evolution adds new themes up to this many
PER_TRACE = 24  # statements kept from one trace

# -- statements ---------------------------------------------------------------------------------

_FIRST_PERSON_EN = re.compile(
    r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|us|our|ours|let's)\b", re.I
)
_SECOND_PERSON_EN = re.compile(r"\b(you|you're|you've|you'd|you'll|your|yours|yourself|ya)\b", re.I)
_SPEAKER = re.compile(r"^\s*([^:：\n]{1,30}?)(?::\s+|：\s*)(.*)$")
_WRITER = {"me", "i", "myself", "我", "我自己"}
_WRITER_LINE = re.compile(r"^\s*(?:me|i|myself|我|我自己)\s*[:：]", re.I | re.M)
_LEADIN_EN = re.compile(
    r"^(also|and|but|so|then|later|afterwards|after that|on top of that|meanwhile|honestly|anyway|mostly|"
    r"frankly|to be honest|small update|quick update|update|btw|ps|p\.s\.|well|okay|ok|oh|today)\b[,:;!]?\s+",
    re.I,
)
_LEADIN_ZH = re.compile(
    r"^(另外|说实话|其实|总之|还有|而且|不过|所以|然后|后来|此外|小更新|更新|今天)[，,：:]?\s*"
)
_HASHTAG = re.compile(r"#[^\s#]+")
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)])\s+")
_PHOTO = re.compile(r"\[shares a photo:\s*([^\]]*)\]", re.I)
_SENTENCE_END = "。！？.!?"
# Reactions and small talk: words that carry no fact in a conversation turn ("Wow, that's great! Thanks!").
_SMALL_TALK_EN = frozenset(
    "wow great amazing awesome thanks thank cool nice glad sweet lovely congrats congratulations haha hahaha lol "
    "yeah yes yep sure totally definitely sounds hey hello bye good luck fun incredible fantastic wonderful "
    "beautiful cute true agree absolutely exactly right omg aww awww woohoo yay sorry hear happy super "
    "that's it's what's there's here's".split()
)
_SMALL_TALK_ZH = ("哇", "太好了", "谢谢", "真棒", "好的", "哈哈", "加油", "恭喜")


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def _first_person(s: str, language: str) -> bool:
    return "我" in s if _lang(language) == "zh" else bool(_FIRST_PERSON_EN.search(s))


def _clean(s: str, language: str) -> str:
    s = _HASHTAG.sub("", s)
    s = _BULLET.sub("", s)
    lead = _LEADIN_ZH if _lang(language) == "zh" else _LEADIN_EN
    while True:
        m = lead.match(s)
        if not m:
            break
        s = s[m.end() :]
    s = " ".join(s.split()).strip(" ,;:，；：")
    if not s:
        return ""
    if _lang(language) == "zh":
        return s if s[-1] in _SENTENCE_END else s + "。"
    s = s[:1].upper() + s[1:]
    return s if s[-1] in _SENTENCE_END else s + "."


def _substantial(s: str, language: str) -> bool:
    return len(set(tx.content_words(s))) >= (3 if _lang(language) == "zh" else 2)


def _informative(s: str, language: str) -> bool:
    """A conversation sentence that states something (not only reactions, thanks or greetings)."""
    if _lang(language) == "zh":
        rest = s
        for w in _SMALL_TALK_ZH:
            rest = rest.replace(w, "")
        return len(set(tx.content_words(rest))) >= 3
    return len({w for w in tx.content_words(s) if w not in _SMALL_TALK_EN}) >= 2


def _dialog_statements(speaker: str, line: str, language: str) -> list[str]:
    """One speaker's turn: what it states about the speaker or their world, attributed to the speaker.
    First-person sentences, and sentences that state something without addressing the other person
    (elliptical "Researching adoption agencies.", answers such as "It was Matt Patterson."); never
    questions or small talk. A shared photo is a statement too (its caption is what the turn shows)."""
    zh = _lang(language) == "zh"
    out = []
    photos = _PHOTO.findall(line)
    for sent in tx.sentences(_PHOTO.sub(" ", line)):
        if sent.rstrip().endswith(("?", "？")):
            continue
        first = _first_person(sent, language)
        if not first and (not zh and _SECOND_PERSON_EN.search(sent) or zh and "你" in sent):
            continue
        if not _informative(sent, language):
            continue
        cleaned = _clean(sent, language)
        if cleaned:
            out.append(cleaned)
    for caption in photos:
        caption = " ".join(caption.split()).rstrip(".")
        if caption:
            out.append(
                ("分享了照片：" if zh else "Shared a photo: ") + caption + ("。" if zh else ".")
            )
    sep = "：" if zh else ": "
    return [f"{speaker}{sep}{s}" for s in out]


def statements(content: str, medium: str, language: str = "en") -> list[str]:
    """The statements a trace makes about its writer (or, in a conversation turn, its speaker), in
    order, each once."""
    chat = medium.startswith("chat")
    # A recorded conversation: a conversation turn, or a chat in which the writer never speaks (a
    # conversation between others exported as chat, e.g. LoCoMo in the release format).
    dialog = medium in DIALOGUE_MEDIA or (chat and not _WRITER_LINE.search(content))
    out: list[str] = []
    seen: set[str] = set()
    for line in content.splitlines():
        for s in _line_statements(line.strip(), medium, language, chat, dialog):
            key = s.lower()
            if key not in seen and _substantial(s, language):
                seen.add(key)
                out.append(s)
    return out


# Media whose entries are not sentences (a query, an appointment): one statement each, so prefixed.
_ENTRY_PREFIX = {
    "search_history": ("搜索了：", "Searched for: "),
    "calendar_event": ("日程：", "Scheduled: "),
}


def _line_statements(
    line: str, medium: str, language: str, chat: bool, dialog: bool
) -> Iterator[str]:
    """The candidate statements of one line: a speaker's turn in a dialogue, or the writer's own line
    (``Me:``, or a lead-in such as ``Subject:`` dropped); nothing from someone else's line in a chat."""
    if not line:
        return
    m = _SPEAKER.match(line)
    if m and (m.group(1).strip().lower() in _WRITER or not _first_person(m.group(1), language)):
        speaker, rest = m.group(1).strip(), m.group(2).strip()
        if speaker.lower() in _WRITER:
            line = rest
        elif dialog:
            yield from _dialog_statements(speaker, rest, language)
            return
        elif chat:
            return  # someone else's line
        else:
            line = rest  # a lead-in such as "Subject:" or "Small update:"
    yield from _own_statements(line, medium, language)


def _own_statements(line: str, medium: str, language: str) -> Iterator[str]:
    """A search or calendar entry as one prefixed statement; otherwise each first-person sentence that
    is not a question."""
    prefix = _ENTRY_PREFIX.get(medium)
    if prefix and not _first_person(line, language):
        cleaned = _clean(line, language)
        if cleaned:
            yield prefix[0 if _lang(language) == "zh" else 1] + cleaned
        return
    for sent in tx.sentences(line):
        if sent.rstrip().endswith(("?", "？")) or not _first_person(sent, language):
            continue
        cleaned = _clean(sent, language)
        if cleaned:
            yield cleaned


# -- comparison ---------------------------------------------------------------------------------

_REVERSAL_EN = re.compile(
    r"\b(no longer|not any ?more|any ?more|stopped|quit|gave up|changed my mind|no more|never again|"
    r"(?:don't|do not|didn't|did not|doesn't|does not) (?:think|believe|feel|like|love|want|enjoy|care))\b",
    re.I,
)
_REVERSAL_ZH = re.compile(r"不再|再也不|改变了想法|改变主意|放弃了|不想再|已经不")
# Left out when comparing statements: reversal markers, the framing of searches and calendar entries, and
# pronouns with their contractions ("I'm", "that's"), which two unrelated short statements share.
_MARKER_WORDS = frozenset(
    "longer anymore any more stopped quit gave changed mind never again don't didn't doesn't "
    "searched scheduled".split()
)
_MARKER_ZH = re.compile(r"不再|再也不|已经不|改变了想法|改变主意|搜索了：|日程：")
_ATTRIBUTION = re.compile(r"^([^:：\n]{1,30}?)(?::\s+|：)")


def reversed_statement(s: str, language: str = "en") -> bool:
    return bool((_REVERSAL_ZH if _lang(language) == "zh" else _REVERSAL_EN).search(s))


def _core(s: str, language: str) -> frozenset[str]:
    if _lang(language) == "zh":
        return frozenset(tx.content_words(_MARKER_ZH.sub("", s)))
    return frozenset(w for w in tx.content_words(s) if w not in _MARKER_WORDS and "'" not in w)


def subject(s: str) -> str:
    """Whom a statement is about: the speaker it is attributed to ("Melanie: ..."), else the writer."""
    m = _ATTRIBUTION.match(s)
    return m.group(1).strip().lower() if m else ""


def overlap(a: str, b: str, language: str = "en") -> float:
    """Jaccard similarity of the content words of two statements (reversal markers left out)."""
    return _jaccard(_core(a, language), _core(b, language))


def _jaccard(wa: frozenset[str], wb: frozenset[str]) -> float:
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def _similarity(wa: frozenset[str], wb: frozenset[str]) -> float:
    """Jaccard, for deciding whether two statements are about the same thing: short statements must
    share at least two content words (or be the same words), since one shared word ("excited") says
    nothing about the subject, and Jaccard over one or two words would merge unrelated small facts."""
    if wa != wb and len(wa & wb) < MIN_SHARED:
        return 0.0
    return _jaccard(wa, wb)


class _Pool:
    """The memories a decision step compares new statements with, in the order shown; entries added
    or changed earlier in the same reply take part in later decisions, as they would for a model."""

    def __init__(self, entries: Iterable[MemoryEntry], language: str) -> None:
        self.language = language
        self.text: dict[str, str] = {}
        self._core: dict[str, frozenset[str]] = {}
        self._who: dict[str, str] = {}
        for e in entries:
            self.put(e.id, e.text)

    def put(self, id_: str, text: str) -> None:
        self.text[id_] = text
        self._core[id_] = _core(text, self.language)
        self._who[id_] = subject(text)

    def drop(self, id_: str) -> None:
        self.text.pop(id_, None)
        self._core.pop(id_, None)
        self._who.pop(id_, None)

    def best(self, call: OfflineCall, item: str) -> tuple[str | None, float]:
        """The most similar memory about the same subject (exact ties broken by ``call.rng``)."""
        core, who = _core(item, self.language), subject(item)
        scored = [(_similarity(core, c), i) for i, c in self._core.items() if self._who[i] == who]
        if not scored:
            return None, 0.0
        top = max(s for s, _ in scored)
        tied = [i for s, i in scored if s == top]
        return (tied[0] if len(tied) == 1 else tied[call.rng.randrange(len(tied))]), top

    def adds_nothing(self, new: str, id_: str, sim: float) -> bool:
        """Mem0's rule: when two statements convey the same thing, keep the one with more information.
        The new one adds nothing if its words are all in the old one, or it is a near-duplicate that
        does not strictly extend it."""
        wn, wo = _core(new, self.language), self._core[id_]
        return wn <= wo or (sim >= NEAR_DUPLICATE and not wo < wn)


# -- Mem0 ---------------------------------------------------------------------------------------


def mem0_extract(call: OfflineCall) -> Mem0Facts:
    inp = call.inputs
    assert isinstance(inp, Mem0ExtractIn), "memory.mem0_extract needs Mem0ExtractIn inputs"
    facts = [
        Mem0Fact(trace=t.id, text=s)
        for t in inp.traces
        for s in statements(t.content, t.medium, inp.language)[:PER_TRACE]
    ]
    return Mem0Facts(facts=facts[:GROUP_ITEMS])


def mem0_update(call: OfflineCall) -> Mem0Operations:
    """ADD / UPDATE / DELETE / NONE for each new fact, in order, against the retrieved memories and
    the memories this reply has already added or changed."""
    inp = call.inputs
    assert isinstance(inp, Mem0UpdateIn), "memory.mem0_update needs Mem0UpdateIn inputs"
    pool = _Pool(inp.memories, inp.language)
    ops: list[Mem0Operation] = []
    for fact in inp.facts:
        best, sim = pool.best(call, fact.text)
        if best is None or sim < SAME_SUBJECT:
            new_id = f"new{len(ops)}"
            pool.put(new_id, fact.text)
            ops.append(Mem0Operation(event="ADD", id=new_id, text=fact.text, facts=[fact.id]))
        elif reversed_statement(fact.text, inp.language) != reversed_statement(
            pool.text[best], inp.language
        ):
            pool.drop(best)  # the new fact contradicts the memory
            ops.append(Mem0Operation(event="DELETE", id=best, facts=[fact.id]))
        elif pool.adds_nothing(fact.text, best, sim):
            ops.append(Mem0Operation(event="NONE", id=best, facts=[fact.id]))
        else:
            pool.put(best, fact.text)
            ops.append(Mem0Operation(event="UPDATE", id=best, text=fact.text, facts=[fact.id]))
    return Mem0Operations(operations=ops)


# -- A-Mem --------------------------------------------------------------------------------------

_DOMAINS_EN: dict[str, frozenset[str]] = {
    k: frozenset(v.split())
    for k, v in {
        "work": "work working job team meeting manager colleague colleagues office project deadline workload emails "
        "email boss promotion career client clients shift hours salary company companies report reports "
        "presented presentation weekends overtime resign hired interview",
        "family": "family mum mom dad father mother sister brother parents son daughter grandmother grandfather "
        "grandma grandpa aunt uncle cousin wife husband",
        "relationships": "partner friend friends boyfriend girlfriend date dating together relationship",
        "social": "party dinner drinks group club catch visit visited invited neighbours neighbors",
        "health": "health doctor sleep slept tired exercise gym ill sick hospital dentist run running therapy",
        "emotion": "felt feel feeling anxious worried happy sad angry guilty proud resentful restless overwhelmed "
        "confident drained stressed lonely relieved grateful nervous excited frustrated",
        "beliefs": "believe believed think thought opinion convinced realised realized learned values matter",
        "money": "money pay paid salary rent bill bills budget savings cost price loan",
        "hobbies": "hobby sketch sketching painting watercolour watercolor guitar music reading book books cooking "
        "recipe garden gardening hiking choir photography football match",
        "home": "home house flat apartment moving laundry grocery groceries shopping cleaning",
        "travel": "travel trip flight train ferry holiday journey abroad",
        "education": "school class course exam study studying university lesson students teacher",
    }.items()
}
_DOMAINS_ZH: dict[str, tuple[str, ...]] = {
    "工作": (
        "工作",
        "同事",
        "经理",
        "会议",
        "项目",
        "加班",
        "邮件",
        "老板",
        "公司",
        "工资",
        "汇报",
        "客户",
        "上司",
    ),
    "家庭": (
        "家人",
        "妈妈",
        "爸爸",
        "父母",
        "姐姐",
        "哥哥",
        "弟弟",
        "妹妹",
        "孩子",
        "母亲",
        "父亲",
        "爷爷",
        "奶奶",
    ),
    "情绪": (
        "感到",
        "焦虑",
        "开心",
        "难过",
        "生气",
        "内疚",
        "疲惫",
        "烦躁",
        "不满",
        "自信",
        "紧张",
        "心情",
    ),
    "观点": ("认为", "相信", "觉得", "看法"),
    "社交": ("朋友", "聚会", "合唱团", "聚餐", "见面"),
    "健康": ("医生", "睡", "运动", "身体", "医院", "健身"),
    "金钱": ("钱", "房租", "账单", "存款", "花销"),
    "爱好": ("下厨", "菜谱", "画", "唱", "音乐", "读书", "摄影"),
    "家务": ("购物", "洗衣", "打扫", "买菜"),
}
MEDIUM_ZH = {
    "diary": "日记",
    "chat_private": "私聊",
    "chat_group": "群聊",
    "memo": "备忘",
    "social_media": "社交动态",
    "calendar_event": "日程",
    "email": "邮件",
    "search_history": "搜索记录",
}
_FORMAT_TAGS = frozenset(MEDIUM_ZH) | frozenset(MEDIUM_ZH.values())
_LATER = {"en": " | Later: ", "zh": " | 后来："}


def _domains(content: str, language: str) -> list[str]:
    if _lang(language) == "zh":
        return [d for d, cues in _DOMAINS_ZH.items() if any(c in content for c in cues)]
    toks = set(tx.words(content))
    hits = [
        (len(toks & cues), i, d) for i, (d, cues) in enumerate(_DOMAINS_EN.items()) if toks & cues
    ]
    return [d for _, _, d in sorted(hits, key=lambda h: (-h[0], h[1]))]


def _hashtags(content: str) -> list[str]:
    out: list[str] = []
    for tag in _HASHTAG.findall(content):
        tag = tag[1:].strip("_-").lower()
        if tag and tag not in out:
            out.append(tag)
    return out


def _lead(content: str, medium: str, language: str) -> str:
    found = statements(content, medium, language)
    lead = (
        found[0]
        if found
        else next((s for s in tx.sentences(" ".join(content.split())) if s), content.strip())
    )
    lead = _HASHTAG.sub("", lead).strip() or content.strip()
    return lead if len(lead) <= 160 else lead[:157].rstrip() + "..."


def _note(trace: TraceView, language: str) -> AMemNote:
    zh = _lang(language) == "zh"
    lead = _lead(trace.content, trace.medium, language) or trace.medium
    date = trace.event_date[:10]
    if zh:
        context = f"{date}的{MEDIUM_ZH.get(trace.medium, trace.medium)}：{lead}"
        fmt = MEDIUM_ZH.get(trace.medium, trace.medium)
    else:
        context = f"{trace.medium.replace('_', ' ').capitalize()} from {date}: {lead}"
        fmt = trace.medium
    tags: list[str] = []
    for tag in [*_domains(trace.content, language), *_hashtags(trace.content), fmt]:
        if tag not in tags:
            tags.append(tag)
    return AMemNote(
        id=trace.id, keywords=tx.keyphrases(trace.content, limit=6), context=context, tags=tags[:8]
    )


def amem_note(call: OfflineCall) -> AMemNotes:
    inp = call.inputs
    assert isinstance(inp, AMemNoteIn), "memory.amem_note needs AMemNoteIn inputs"
    return AMemNotes(notes=[_note(t, inp.language) for t in inp.traces])


def amem_links(call: OfflineCall) -> AMemLinks:
    """Link a note to the neighbours that share keywords with it or overlap with its content."""
    inp = call.inputs
    assert isinstance(inp, AMemLinksIn), "memory.amem_links needs AMemLinksIn inputs"
    cores: dict[str, frozenset[str]] = {}

    def core(n: AMemNoteView) -> frozenset[str]:
        if n.id not in cores:
            cores[n.id] = _core(n.content, inp.language)
        return cores[n.id]

    out = []
    for item in inp.items:
        mine = {k.lower() for k in item.note.keywords}
        related = [
            n.id
            for n in item.neighbours
            if n.id != item.note.id
            and (
                len(mine & {k.lower() for k in n.keywords}) >= LINK_SHARED_KEYWORDS
                or _jaccard(core(item.note), core(n)) >= LINK_OVERLAP
            )
        ]
        out.append(AMemLinkSet(note=item.note.id, links=related))
    return AMemLinks(links=out)


def amem_evolve(call: OfflineCall) -> AMemEvolution:
    """Linked neighbours take on each new note's thematic tags and record it in their context; a
    neighbour that evolves twice in the group builds on its first update."""
    inp = call.inputs
    assert isinstance(inp, AMemEvolveIn), "memory.amem_evolve needs AMemEvolveIn inputs"
    marker = _LATER[_lang(inp.language)]
    state: dict[
        str, tuple[str, list[str]]
    ] = {}  # neighbour -> its context and tags after this reply's updates
    updates = []
    for item in inp.items:
        linked = set(item.linked)
        for n in item.neighbours:
            if n.id not in linked:
                continue
            context0, tags0 = state.get(n.id, (n.context, list(n.tags)))
            tags = list(tags0)
            for tag in item.note.tags:
                if tag not in tags and tag not in _FORMAT_TAGS and len(tags) < MAX_TAGS:
                    tags.append(tag)
            base = context0.split(marker)[0].rstrip()
            context = f"{base}{marker}{item.note.timestamp[:10]} {item.note.context}"
            if len(context) > 400:
                context = context[:397].rstrip() + "..."
            if tags != tags0 or context != context0:
                state[n.id] = (context, tags)
                updates.append(
                    AMemNeighbourUpdate(note=item.note.id, id=n.id, context=context, tags=tags)
                )
    return AMemEvolution(updates=updates[:GROUP_ITEMS])


# -- O-Mem --------------------------------------------------------------------------------------

_ATTRIBUTE_EN = re.compile(
    r"\b(think|thinks|thought|believe|believes|believed|came to believe|convinced|value|values|valued|love|loves|"
    r"like|likes|hate|hates|prefer|prefers|enjoy|enjoys|dislike|dislikes|want|wants|wish|hope|always|never|"
    r"no longer|i am|i'm|my favou?rite|realised|realized|learned that|worry|worried about|care about|"
    r"told [\w' ]{1,30}? that|said that|i feel|i've become|i have become|i tend)\b",
    re.I,
)
_ATTRIBUTE_ZH = re.compile(
    r"觉得|认为|相信|喜欢|讨厌|热爱|希望|想要|总是|从不|不再|我是|最爱|在乎|担心|说，|说:|说：|意识到|我感觉|习惯"
)
_FUNCTION_ZH = set("的了是在我你他她它们和就也都很又还这那说对把被着过吗呢吧啊")
_FRAMING_ZH = ("感到", "觉得", "开始", "认为", "时候", "相信")


def is_attribute(s: str, language: str = "en") -> bool:
    """Opinions, beliefs, preferences, traits and present feelings, as opposed to events."""
    return bool((_ATTRIBUTE_ZH if _lang(language) == "zh" else _ATTRIBUTE_EN).search(s))


def _runs_en(s: str) -> list[tuple[str, ...]]:
    runs, cur = [], []
    for w in tx.words(s):
        if (
            w not in tx.STOPWORDS_EN
            and len(w) > 2
            and not w.isdigit()
            and not _FIRST_PERSON_EN.fullmatch(w)
        ):
            cur.append(w)
        else:
            if cur:
                runs.append(tuple(cur))
            cur = []
    if cur:
        runs.append(tuple(cur))
    return [r[-3:] for r in runs]


def topics(texts: list[str], language: str = "en", limit: int = 2) -> list[str]:
    """The most salient subject phrases: repeated multi-word content runs (en), 4-character spans (zh)."""
    counts: Counter = Counter()
    first: dict[str, int] = {}
    length: dict[str, int] = {}
    for text in texts:
        if _lang(language) == "zh":
            grams = []
            for run in re.findall(r"[\u4e00-\u9fff]+", text):
                grams += [
                    g
                    for g in (run[i : i + 4] for i in range(len(run) - 3))
                    if not (_FUNCTION_ZH & set(g)) and not any(f in g for f in _FRAMING_ZH)
                ]
            phrases = [(g, 4) for g in grams]
        else:
            phrases = [(" ".join(r), len(r)) for r in _runs_en(text) if len(r) >= 2]
        for p, n in phrases:
            first.setdefault(p, len(first))
            length[p] = n
            counts[p] += 1
    ranked = sorted(counts, key=lambda p: (-counts[p], -length[p], first[p]))
    out = ranked[:1] + [p for p in ranked[1:limit] if counts[p] >= 2]
    if not out:
        joined = " ".join(texts)
        out = tx.keyphrases(joined, limit=1)
    return out


def _extraction(trace: TraceView, language: str) -> OMemExtraction:
    found = statements(trace.content, trace.medium, language)
    return OMemExtraction(
        id=trace.id,
        topics=topics(found or [trace.content], language),
        keywords=tx.keyphrases(trace.content, limit=8),
        attributes=[s for s in found if is_attribute(s, language)][:PER_TRACE],
        facts=[s for s in found if not is_attribute(s, language)][:PER_TRACE],
    )


def omem_extract(call: OfflineCall) -> OMemExtractions:
    inp = call.inputs
    assert isinstance(inp, OMemExtractIn), "memory.omem_extract needs OMemExtractIn inputs"
    return OMemExtractions(interactions=[_extraction(t, inp.language) for t in inp.traces])


def omem_route(call: OfflineCall) -> OMemRoutes:
    """ADD / IGNORE / UPDATE for each new attribute or event, in order, against the most similar
    existing entries of its kind and those this reply has already added or changed."""
    inp = call.inputs
    assert isinstance(inp, OMemRouteIn), "memory.omem_route needs OMemRouteIn inputs"
    pools = {
        "attribute": _Pool(inp.attributes, inp.language),
        "fact": _Pool(inp.facts, inp.language),
    }
    routes = []
    for item in inp.items:
        pool = pools[item.kind]
        best, sim = pool.best(call, item.text)
        if best is None or sim < SAME_SUBJECT:
            pool.put(item.id, item.text)
            routes.append(OMemRoute(item=item.id, op="ADD"))
            continue
        changed = reversed_statement(item.text, inp.language) != reversed_statement(
            pool.text[best], inp.language
        )
        if not changed and pool.adds_nothing(item.text, best, sim):
            routes.append(OMemRoute(item=item.id, op="IGNORE"))
        else:
            pool.put(best, item.text)
            routes.append(OMemRoute(item=item.id, op="UPDATE", id=best, text=item.text))
    return OMemRoutes(routes=routes)
