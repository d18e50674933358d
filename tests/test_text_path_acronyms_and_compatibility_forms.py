"""The text path of a request, second review: words the spelling normaliser must not bend (acronyms opening a
text, URLs, email addresses, identifiers), compatibility forms (full-width letters, ligatures) read in their
plain letters inside entities and names too, and chained requests typed in full-width letters cut as in ASCII.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from intentvcs.core.entities import Entity
from intentvcs.core.outputs import GraphOutputs, tuple_array
from intentvcs.core.segmentation import _names_only, _refers_back, cut
from intentvcs.core.spelling import Spelling, infer_normalised
from intentvcs.service import onnx_session
from intentvcs.service.engine import Engine
from tests.helpers.bundle import make_tiny_bundle

TRAINING = ["what is the balance of my account", "play the bbc news", "call alex now", "show me the news today",
            "play some music", "what is the weather in boston", "play songs by adele", "keep the shop open"]


@pytest.fixture(scope="module")
def spelling() -> Spelling:
    return Spelling.from_texts(TRAINING)


def _full_width(text: str) -> str:
    """``text`` as an East Asian input method types it: full-width ASCII, ideographic spaces."""
    return "".join("\u3000" if c == " " else chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


# -- acronyms ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "AMEX balance please",      # was "ALEX balance please": the demo model then answered no intent at all
    "RBC balance please",       # was "BBC ...": the demo answered no intent and no bank
    "ABC news today",           # was "BBC news today"
    "KEXP news today",          # was "KEEP news today"
    "IHOP is open",             # was "SHOP is open"
    "Check My RBC Balance",     # Title Case: capitals mark no name there, but an ALL-CAPS word is an acronym
])
def test_a_short_all_caps_word_in_text_not_all_caps_is_an_acronym_wherever_it_stands(spelling, text):
    """Capitals after the first word mark names; an ALL-CAPS word opening a text was corrected as a sentence
    start would be, one edit to a training word ("AMEX" -> "ALEX"): with the demo bundle, "AMEX balance please"
    answered no intent (check_balance without the normaliser), "RBC balance please" no intent and no bank."""
    assert spelling.normalise(text) == text


def test_shouted_words_and_all_caps_text_are_still_mended(spelling):
    assert spelling.normalise("BALSNCE please!") == "BALANCE please!"  # longer than an acronym: shouted
    assert spelling.normalise("ABC NEWS TODAU") == "BBC NEWS TODAY"  # one case throughout: every word alike
    assert spelling.normalise("what is my balsnce") == "what is my balance"


# -- URLs, email addresses, identifiers ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "open www.balanse.com and check my balanse",
    "open https://example.org/musci/balanse now and check my balanse",
    "see balanse.com and check my balanse",
    "mail balanse@bank.com and check my balanse",
    "tag @balanse and check my balanse",
    "push my_balanse_v2 and check my balanse",
])
def test_the_words_of_urls_email_addresses_and_identifiers_are_not_spelling(spelling, text):
    """"www.balanse.com" was read as "www.balance.com", "my_balanse_v2" as "my_balance_v2": an address or an
    identifier is not a misspelt word; the words around it are still mended."""
    rewrite = spelling.rewrite(text)
    code = text.split()[1]
    assert rewrite.text == text[:text.rindex("balanse")] + "balance"
    assert rewrite.text.split()[1] == code


def test_looking_for_addresses_in_a_long_run_of_letters_takes_linear_time(spelling):
    text = "x" * 50_000 + " balsnce"
    began = time.perf_counter()
    assert spelling.normalise(text).endswith(" balance")
    assert time.perf_counter() - began < 2.0  # tried from every letter of the run, about 30 s


# -- compatibility forms inside entities and names -----------------------------------------------------------------

def _plain_city_model(texts):
    """A graph that finds "boston" as a city only in plain letters (a BERT tokenizer reads "ｂｏｓｔｏｎ" as [UNK])."""
    found = [(Entity("city", text.index("boston"), text.index("boston") + 6, 0.9),) if "boston" in text else ()
             for text in texts]
    logits = np.zeros((len(texts), 1), dtype=np.float32)
    return GraphOutputs(logits, logits, logits, tuple_array(found))


@pytest.mark.parametrize("tags", [False, True])
def test_a_compatibility_form_inside_an_entity_is_read_in_its_plain_letters(spelling, tags):
    """"ｂｏｓｔｏｎ" read as "boston" is no correction but the word as sent, in letters the tokenizer knows: undone as a
    bent name, the text was read again in full-width letters, [UNK] to the model, and the city was lost."""
    text = "weather in ｂｏｓｔｏｎ"
    outputs, read = infer_normalised(spelling, [text], _plain_city_model, tags=tags)
    assert read == ["weather in boston"]
    assert [e.to_dict(text)["value"] for e in outputs.entities[0]] == ["ｂｏｓｔｏｎ"]


def test_a_word_kept_as_a_name_or_protected_is_kept_in_its_plain_letters(spelling):
    """A name (a capitalised word in mixed-case text), an acronym or a protected word is kept as written, but
    not in a compatibility form: "play songs by ＡＤＥＬＥ" was read as [UNK] there."""
    assert spelling.normalise("play songs by ＡＤＥＬＥ") == "play songs by ADELE"
    assert spelling.normalise("play songs by Ａｄｅｌｌｅ") == "play songs by Adelle"  # a name: folded, not corrected
    text = "weather in ｂｏｓｔｎ"
    rewrite = spelling.rewrite(text, protected=[(11, 16)])
    assert rewrite.text == "weather in bostn" and rewrite.to_original(11, 16) == (11, 16)
    assert spelling.normalise("ﬁnd the news") == "find the news"
    assert spelling.normalise("re\u0301sume\u0301 the news") == "re\u0301sume\u0301 the news"  # NFD stays as sent


def test_the_engine_answers_a_full_width_entity_read_in_plain_letters(tmp_path_factory, monkeypatch):
    """Served: the entity on a full-width word is read as the plain word (``normalised``), and answered at the
    offsets of the word as sent."""
    bundle = make_tiny_bundle(tmp_path_factory.mktemp("pass2"), entity_types=("city",), spelling_texts=TRAINING)
    engine = Engine(bundle, provider="cpu", threads=1)

    def last_word_a_city(tag_logits, per_text_words, tags):
        return [(Entity("city", text_words[-1].start, text_words[-1].end, 0.9),) if text_words else ()
                for text_words in per_text_words]

    monkeypatch.setattr(onnx_session, "decode_batch", last_word_a_city)
    text = "weather in ｂｏｓｔｏｎ"
    answer = engine.predict([text])[0]
    assert answer["normalised"] == "weather in boston"
    assert [(e["start"], e["end"], e["value"]) for e in answer["entities"]] == [(11, 17, "ｂｏｓｔｏｎ")]


# -- segmentation of full-width text -------------------------------------------------------------------------------

@pytest.mark.parametrize("ascii_text", [
    "play some jazz and turn off the lights",
    "play some jazz, turn off the lights",
    "play some jazz; and then turn off the lights",
])
def test_a_chained_request_in_full_width_letters_cuts_as_in_ascii(ascii_text):
    """"ａｎｄ", "，" and "；" cut nothing, so a chained request typed with an East Asian input method was answered
    with one intent (the demo: "turn_off_lights" alone), while the normaliser had the model read it in ASCII."""
    text = _full_width(ascii_text)
    assert cut(text) == cut(ascii_text) and len(cut(text)) == 2


def test_full_width_connectors_and_pronouns_count_as_their_ascii_forms():
    part = _full_width("delta and united")
    assert _names_only(part, [Entity("airline", 0, 5, 0.9), Entity("airline", 10, 16, 0.9)])
    assert _refers_back(_full_width("play it"))


def test_a_chained_request_in_mathematical_letters_cuts_as_the_model_reads_it():
    """The normaliser reads every compatibility form plainly (NFKC); the cutting folded full-width forms alone,
    so "𝐩𝐥𝐚𝐲 𝐣𝐚𝐳𝐳 𝐚𝐧𝐝 ..." in mathematical bold was one request."""
    ascii_text = "play some jazz and turn off the lights"
    bold = "".join(chr(0x1D41A + ord(c) - ord("a")) if c.isalpha() else c for c in ascii_text)
    assert len(cut(bold)) == 2
    assert [bold[start:end] for start, end in cut(bold)] == [bold[:14], bold[19:]]
