"""Small hand-made word lists: closed-class words, fillers and phrase banks.

Nothing here is loaded from disk; these are the few things no library ships in
the form the operators need (filler inventories from NATURE and LAUG, polite
padding for RADDLE verbosity, a stop-word thesaurus, since WordNet has no
function words).
"""

from __future__ import annotations

ARTICLES = frozenset({"a", "an", "the"})
DETERMINERS = ARTICLES | frozenset({
    "this", "that", "these", "those", "my", "your", "his", "her", "its", "our",
    "their", "some", "any", "every", "each", "no", "another", "all", "both",
    "few", "several", "much", "many", "more", "most",
})
SUBJECT_PRONOUNS = frozenset({"i", "you", "we", "they", "he", "she"})
MODALS = frozenset({
    "can", "could", "will", "would", "shall", "should", "may", "might", "must",
    "can't", "cannot", "couldn't", "won't", "wouldn't", "shouldn't",
})
AUXILIARIES = frozenset({
    "am", "is", "are", "was", "were", "be", "been", "being", "do", "does",
    "did", "have", "has", "had", "don't", "doesn't", "didn't", "isn't",
    "aren't", "wasn't", "weren't", "haven't", "hasn't", "what's", "where's",
    "who's", "how's", "there's", "it's", "that's", "i'm", "you're", "we're",
    "they're", "i'd", "i'll", "i've", "you'd", "you'll", "we'd", "we'll",
})
PREPOSITIONS = frozenset({
    "about", "above", "across", "after", "against", "along", "around", "at",
    "before", "behind", "below", "between", "by", "during", "for", "from",
    "in", "inside", "into", "near", "of", "off", "on", "onto", "out", "over",
    "per", "since", "through", "till", "to", "toward", "towards", "under",
    "until", "up", "upon", "via", "with", "within", "without",
})
CONJUNCTIONS = frozenset({"and", "or", "but", "if", "because", "so", "than", "then", "as", "whether"})
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
OTHER_PRONOUNS = frozenset({
    "me", "him", "us", "them", "it", "myself", "yourself", "ourselves",
    "there", "here", "something", "anything", "everything", "nothing",
    "someone", "anyone", "everyone", "let's", "lets", "not", "too", "also",
    "very", "just", "please", "like", "thanks", "thank", "well", "right", "really",
})
# Interjections are words in CMU but never a sensible replacement ("a" -> "uh").
INTERJECTIONS = frozenset({
    "um", "uh", "uhm", "er", "erm", "hmm", "mm", "oh", "ah", "eh", "huh", "okay",
    "ok", "yes", "yeah", "no", "hey", "hi", "hello", "wow", "oops", "ha",
})
# Words no synonym or sound-alike operator should pick: function words, and
# discourse words whose WordNet senses are the wrong ones ("like" -> "wish").
FUNCTION_WORDS = (
    DETERMINERS | SUBJECT_PRONOUNS | MODALS | AUXILIARIES | PREPOSITIONS
    | CONJUNCTIONS | WH_WORDS | OTHER_PRONOUNS | INTERJECTIONS
)

# Words after which the next word is read as a verb (the "light heuristic" of
# tagging.find_verb): "to book", "can you book", "i want", "please play".
VERB_CUES = MODALS | SUBJECT_PRONOUNS | frozenset({
    "to", "please", "do", "does", "did", "don't", "doesn't", "didn't",
    "let's", "lets", "i'll", "i'd", "we'll", "you'll", "just", "also",
})

# Words after which a possible adjective is read as one ("is it safe", "too cold").
ADJECTIVE_CUES = frozenset({
    "is", "are", "was", "were", "be", "been", "am", "it's", "that's", "i'm",
    "you're", "we're", "they're", "very", "so", "too", "really", "quite",
    "pretty", "more", "most", "less", "least", "looks", "seems", "feel", "feels",
})

# NATURE fillers (Alfonso-Hermelo et al. 2021 list "okay so", "if you can", "like",
# "actually", "basically"), extended with common spoken variants.
FILLERS_BEGIN = ("okay so", "hey", "um", "so", "well", "okay", "hi", "alright so")
FILLERS_END = ("if you can", "please", "thanks", "thank you", "if possible", "for me", "right now")
FILLERS_VERB = ("like", "actually", "basically", "just", "really", "kind of", "literally")

# LAUG disfluencies.
FILLED_PAUSES = ("um", "uh", "er", "uhm", "hmm", "uh,", "um,")
RESTART_STARTERS = ("i just", "i was", "so i", "i mean", "can you", "let me", "i want")
REPAIR_MARKERS = ("sorry i mean", "i mean", "no wait", "uh i mean", "sorry")

# RADDLE verbosity: (prefix, suffix) by sentence type (tagging.sentence_type);
# a suffix carries its own separator.
VERBOSE_COMMAND = (
    ("could you please", " for me"), ("would you mind helping me", ", please"),
    ("i was wondering if you could", " for me"), ("hi there, can you please", ", thank you so much"),
)
VERBOSE_QUESTION = (
    ("could you please tell me", " if you don't mind"), ("i would like to know", ", please"),
    ("hi, do you happen to know", ", thanks a lot"), ("can you help me figure out", " please"),
)
VERBOSE_STATEMENT = (
    ("hi there, so basically", ", thank you so much"), ("excuse me,", " if that's possible"),
    ("hello, i hope you can help,", ", thanks in advance"),
)

# RADDLE simplification: phrases a terse user leaves out, longest first so that
# "could you please" goes before "could you". Not "thanks" / "thank you": thanking
# is an intent of its own (CLINC150's thank_you; "thanks for helping" must not
# become "for helping"), and an operator cannot tell a thank-you that is the
# request from one tacked onto another, so it keeps both; the labels stay true.
DROPPABLE_PHRASES = tuple(sorted((tuple(p.split()) for p in (
    "could you please", "can you please", "would you please", "could you",
    "can you", "would you", "will you", "i would like to", "i'd like to",
    "i want to", "i need to", "i wanna", "please", "for me", "i would like",
    "i'd like", "a", "an", "the", "just", "kindly",
)), key=len, reverse=True))
# The request scaffolding among them goes only where a clause starts (the first word, or
# after a punctuation mark or a CLAUSE_OPENERS word): inside a clause it is the question's
# own subject and modal ("how old will you be", "what can you do", "do i need to change
# my oil" are no "how old be", "what do", "do change my oil"). The single words and
# "for me" go wherever they stand.
CLAUSE_START_PHRASES = frozenset(p for p in DROPPABLE_PHRASES if len(p) > 1 and p != ("for", "me"))
# Words after which a new clause (or a request) starts: coordinating conjunctions,
# greetings, politeness words and interjections ("book a flight and i need to rent a car",
# "please could you play the news", "okay so can you"). Not the subordinating ones:
# "what happens if i need to cancel" keeps its subject.
CLAUSE_OPENERS = INTERJECTIONS | frozenset({"and", "but", "or", "so", "then", "please", "kindly", "thanks", "well"})

# A thesaurus for stop words (WordNet has none): near-synonyms a speaker could
# swap in without changing the request. A preposition keeps its own word where
# it is a verb's particle ("turn on" is no "turn upon": tagging.is_particle);
# "a"/"an" have no entry, since "one" is a numeral, not an article ("one few
# songs", "twice one day"); entries in PLURAL_ONLY go only before a plural
# noun ("some songs" -> "a few songs", not "some music" -> "a few music").
STOPWORD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "can": ("could",), "could": ("can",), "will": ("would",), "would": ("will",),
    "should": ("ought to",), "must": ("have to",), "what": ("which",), "which": ("what",),
    "about": ("regarding", "concerning"), "in": ("within",), "on": ("upon",),
    "with": ("along with",), "from": ("out of",),
    "near": ("close to",), "until": ("till",), "till": ("until",), "before": ("prior to",),
    "after": ("following",), "because": ("since",), "and": ("plus", "as well as"),
    "also": ("too", "as well"), "too": ("also",), "very": ("really", "extremely"),
    "every": ("each",), "each": ("every",), "some": ("a few",),
    "this": ("that",), "these": ("those",), "those": ("these",), "into": ("in",),
    "onto": ("on",), "via": ("through",), "through": ("via",), "during": ("throughout",),
    "if": ("whether",), "whether": ("if",), "but": ("however",),
    "i'm": ("i am",),
    "don't": ("do not",), "can't": ("cannot",), "won't": ("will not",), "it's": ("it is",),
    "what's": ("what is",), "please": ("kindly",), "at": ("around",),
}
PLURAL_ONLY = frozenset({"a few"})

# The WordNet sense (1-based) a word has in requests to an assistant where its
# most frequent one (SemCor's, from the Brown corpus) is another, or None where
# no sense gives a safe synonym; thesaurus.synonyms draws on that sense only.
# Found by listing syn_any's replacements on training/default_data/assistant and
# keeping the words seen three times or more. "book" a table and "call" mom are
# senses 2 (reserve) and 3 (phone), not hiring a performer and naming. An
# "alarm" is a device, not dismay; a "table" is furniture or a booking, not a
# tabular array; "text", "light", "play", "account" and "outside" are a message,
# a lamp, a playback, a bank account and out of doors, not textual matter,
# radiation, drama, a chronicle and an exterior. A user does not "state" or
# "acquire" a joke, "place" an alarm, "do" a call, "necessitate" a cab, "travel"
# a meeting, "incapacitate" notifications or "reassign" money, and "allow me
# know" is no English. "light", "table" and "weather" as verbs are nouns that
# tagging.guess_pos reads as verbs at a clause start ("lights off").
_NO_SENSE = ("alarm", "table", "text", "light", "play", "account", "outside")
_NO_VERB_SENSE = ("tell", "say", "get", "set", "put", "make", "need", "move", "disable", "transfer", "let",
                  "light", "table", "weather")
ASSISTANT_SENSES: dict[str, dict[str, int | None]] = {
    "n": dict.fromkeys(_NO_SENSE),
    "v": {"book": 2, "call": 3, **dict.fromkeys(_NO_VERB_SENSE)},
    "a": {},
    "r": {},
}

# Generated words must never be slurs or obscenities. WordNet says so in the
# gloss ("(ethnic slur) offensive term for ..."); every lemma of such a synset
# is blocked (which also blocks a few innocent co-lemmas such as "tool": a
# replacement we can do without). The list catches what WordNet glosses neutrally.
OFFENSIVE_GLOSS = (
    r"offensive (?:term|name|word|slang)|ethnic slur|obscene (?:term|word)|vulgar (?:term|word)"
    r"|disparaging (?:term|name)|insulting (?:term|name)|coarse (?:term|word)|\((?:vulgar|obscene)\)"
)
OFFENSIVE_WORDS = frozenset({
    "bitch", "whore", "retard", "negro", "nigga", "slut", "twat", "hooker", "homo",
    "dyke", "bastard", "piss", "prick", "tit", "tits", "boob", "boobs", "wank", "bugger",
    "screw", "hump", "rape", "sex", "sexy", "naked", "nude",
})
