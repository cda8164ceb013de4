"""The scan that lets a text with no trace of a secret or a credential pattern through
untouched (``holodeck_core/redaction.py``, docs/benchmarks.md) changes no output: on generated
hostile texts, redacting a text gives what the full scrub gives, and no registered secret in
any of its encodings survives, whichever set of secrets a process redacted with before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from holodeck_core.redaction import encodings, redact, redact_text

SECRETS = (
    "sk-Fast9path0001xyz",
    'pä"ss wörd/+=?&#@:x9',  # every encoding differs: JSON, URL-quoted, base64
    "K\u212a\u017fcase-fold-secret-7",  # a Kelvin sign and a long s fold to k and s
    "bearer-looking-secret-42",
)
TAIL = '\n"bearer \n"?x=\n'
"""A trace of a bearer token and of a query parameter that no pattern matches, even joined to
what comes before it: a text with it appended goes through the full scrub, which must change
the text before it exactly as the text alone is changed."""
FORMS = sorted({form for secret in SECRETS for form in encodings(secret)})
FRAGMENTS = (
    *("://", "@", ":", "/", "?", "&", ";", "=", "#", "-", "--", "_", "+", ".", "~", "***"),
    *("api_key", "Api-Key", "APIKEY", "token", "TOKEN", "passWord", "secret", "sig", "key"),
    *("X-Amz-Signature", "access_token", "Bearer", "bearer", "BEARER", "https", "user", "pw"),
    *(" ", "\t", "\n", "\x0b", "\x1c", "\x1f", "\x85", "\u00a0", "\u2028", "\u3000"),
    *("\u212a", "\u017f", "\u0131", "\u0130", '"', "'", "`", ")", "]", "<", ">"),
    *("abcdefghij", "0123456789", "x"),
    *FORMS,
    *(form[:cut] for form in FORMS for cut in (7, 8, 11)),
    *(form[cut:] for form in FORMS for cut in (1, 5)),
)
PLAIN = "acdefghijlmnoqruvwxyz0123456789 .,:/-_=!\n\u00e9"
"""Without b, k (nor a Kelvin sign), s and p no secret-named word, no bearer and no secret's
head can be spelled; without ``@`` no URL's userinfo, without ``?&;`` no query parameter."""
SPACES = (
    " ",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\x85",
    "\u00a0",
    "\u2028",
    "\u3000",
)
VALUE = st.text(alphabet="abcXYZ0189._~+/=-%", min_size=8, max_size=14)


def any_case(word: str) -> st.SearchStrategy[str]:
    """``word`` in any mix of cases, a Kelvin sign for a k and a long s for an s now and then."""
    folds = {"k": ("k", "K", "\u212a"), "s": ("s", "S", "\u017f")}
    return st.tuples(*(st.sampled_from(folds.get(c, (c.lower(), c.upper()))) for c in word)).map(
        "".join
    )


def joined(*parts: st.SearchStrategy[str] | str) -> st.SearchStrategy[str]:
    return st.tuples(*(st.just(p) if isinstance(p, str) else p for p in parts)).map("".join)


QUERY_NAMES = ("key", "sig", "X-Amz-Signature", "access_token", "a.key", "code", "api-key")
SECRET_WORDS = ("api_key", "api-key", "apikey", "token", "password", "secret")
CREDENTIALS = st.one_of(
    joined(any_case("bearer"), st.sampled_from(SPACES), VALUE),  # a bearer token
    joined(  # a URL's userinfo
        st.sampled_from(("https", "postgres", "s3", "a+b.c-d")),
        "://",
        st.sampled_from(("", "user", "u.s-r")),
        st.sampled_from(("", ":")),
        VALUE.map(lambda v: v.replace("/", "")),
        "@host/p",
    ),
    joined(  # a credential-like query parameter
        st.sampled_from("?&;"),
        st.sampled_from(QUERY_NAMES),
        "=",
        VALUE,
    ),
    joined(  # a secret-named argv flag
        st.sampled_from(("-", "--")),
        st.sampled_from(("", "my-", "x_")),
        st.sampled_from(SECRET_WORDS).flatmap(any_case),
        st.sampled_from(("=", " ", "\t", "  ")),
        VALUE,
    ),
    st.sampled_from(FORMS),  # a registered secret in one of its forms
    st.sampled_from([form[:cut] for form in FORMS for cut in (8, 11)]),  # or a piece of one
)
texts = st.lists(
    CREDENTIALS | st.sampled_from(FRAGMENTS) | st.text(min_size=1, max_size=3), max_size=14
).map("".join)
single = joined(
    st.text(alphabet=PLAIN, max_size=6), CREDENTIALS, st.text(alphabet=PLAIN, max_size=6)
)
"""One credential in plain text: the texts a trace that misses its pattern lets through."""
secret_sets = st.lists(st.sampled_from(SECRETS), unique=True).map(tuple)


def test_the_generated_texts_are_what_they_claim() -> None:
    assert not any("\n" in form for form in FORMS)  # none is joined to the tail
    assert redact_text(TAIL, SECRETS) == TAIL
    assert all(set(form[:8]) - set(PLAIN) for form in FORMS)  # no head spelled in PLAIN


@settings(max_examples=600, deadline=None)
@given(text=single | texts, secrets=secret_sets)
def test_a_text_is_redacted_as_the_full_scrub_redacts_it(
    text: str, secrets: tuple[str, ...]
) -> None:
    redacted = redact_text(text, secrets)
    assert redact_text(text + TAIL, secrets) == redacted + TAIL
    for secret in secrets:
        for form in encodings(secret):
            assert form not in redacted, (form, text)


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=PLAIN, max_size=60), secrets=secret_sets)
def test_a_text_with_no_trace_is_let_through_as_it_is(text: str, secrets: tuple[str, ...]) -> None:
    """No head of a secret's form, no ``://…@``, ``?name=``, secret-named word or bearer."""
    assert redact_text(text, secrets) is text


@settings(max_examples=100, deadline=None)
@given(text=texts, first=secret_sets, second=secret_sets)
def test_a_map_key_is_redacted_under_the_secrets_of_each_call(
    text: str, first: tuple[str, ...], second: tuple[str, ...]
) -> None:
    """The scrubbed map keys a scrubber remembers are those of its own set of secrets."""
    for secrets in (first, second, first):
        assert list(redact({text: 1}, secrets)) == [redact_text(text, secrets)]


def folded(word: str) -> str:
    """``word`` with a Kelvin sign for each k and a long s for each s (the same to ``(?i)``)."""
    return word.replace("k", "\u212a").replace("s", "\u017f")


def every_credential() -> list[str]:
    """Each credential pattern in each spelling the scrub accepts, alone in plain text."""
    value = "abcXYZ0189._~+=-"
    cases = [str.lower, str.upper, str.title, folded]
    found = [f"{case('bearer')}{space}{value}" for case in cases for space in SPACES]
    found += [
        f"{dash}{prefix}{case(word)}{sep}{value}"
        for dash in ("-", "--")
        for prefix in ("", "my-", "x_")
        for word in SECRET_WORDS
        for case in cases
        for sep in ("=", " ", "\t", "\n  ")
    ]
    found += [f"h/p{mark}{name}={value}" for mark in "?&;" for name in QUERY_NAMES]
    found += [
        f"{scheme}://{user}{colon}{value.replace('/', '')}@host/p"
        for scheme in ("https", "postgres", "a+b.c-d")
        for user in ("", "user", "u.s-r")
        for colon in ("", ":")
    ]
    found += FORMS
    return [f"said {text} here" for text in found]


def test_every_credential_alone_is_redacted_as_the_full_scrub_redacts_it() -> None:
    """A trace that misses one spelling lets that credential through: each is tried, and so is
    each piece of a secret a provider may echo (a piece of a form with characters no key has,
    ``%`` or ``\\``, is left as the full scrub leaves it)."""
    pieces = [f"said {form[:cut]}, here" for form in FORMS for cut in (8, 11)]
    missed = [
        text
        for text in [*every_credential(), *pieces]
        if redact_text(text + TAIL, SECRETS) != redact_text(text, SECRETS) + TAIL
    ]
    assert not missed
    assert not [text for text in every_credential() if redact_text(text, SECRETS) == text]
