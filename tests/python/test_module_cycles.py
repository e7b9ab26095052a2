"""No cycles among the modules of a Rust crate (modgraph.py says what counts as a dependency).

Every crate of the workspace is checked: crates/*/src, simulator/src, python/native/src. The
checker itself is tested first on small synthetic crates, so a pass means something.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modgraph import Crate, cycles, describe

REPO = Path(__file__).resolve().parents[2]


def crate(tmp: Path, files: dict[str, str], **kw) -> Crate:
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return Crate(tmp, **kw)


# --- the checker ------------------------------------------------------------------------------


def test_two_module_cycle_is_found(tmp_path: Path) -> None:
    c = crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A(B);\n",
            "b.rs": "pub struct B;\npub fn make() -> crate::a::A { todo!() }\n",
        },
    )
    assert set(c.edges) == {("crate::a", "crate::b"), ("crate::b", "crate::a")}
    assert cycles(c.edges) == [["crate::a", "crate::b", "crate::a"]]
    (text,) = describe(c)
    assert "a.rs:1: crate::b::B" in text and "b.rs:2: crate::a::A" in text


def test_one_way_dependencies_are_no_cycle(tmp_path: Path) -> None:
    c = crate(
        tmp_path,
        {
            "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
            "a.rs": "use crate::{b::{self, B}, c::*};\nfn f() { b::g(); }\n",
            "b.rs": "pub struct B;\npub fn g() { crate::c::h() }\n",
            "c.rs": "pub fn h() {}\n",
        },
    )
    assert set(c.edges) == {("crate::a", "crate::b"), ("crate::a", "crate::c"), ("crate::b", "crate::c")}
    assert cycles(c.edges) == []


def test_three_module_cycle_through_super_and_a_directory_module(tmp_path: Path) -> None:
    c = crate(
        tmp_path,
        {
            "main.rs": "mod x;\nfn main() {}\n",
            "x/mod.rs": "mod p;\nmod q;\npub(crate) fn helper() {}\n",
            "x/p.rs": "use super::q::Q;\npub struct P(Q);\n",
            "x/q.rs": "pub struct Q;\nfn f() { super::helper(); }\n",
        },
    )
    assert cycles(c.edges) == []  # q -> x (an item of x), p -> q: no way back
    (tmp_path / "x/mod.rs").write_text("mod p;\nmod q;\npub(crate) fn helper() { let _ = p::P; }\n")
    c = Crate(tmp_path)
    assert cycles(c.edges) == [["crate::x", "crate::x::p", "crate::x::q", "crate::x"]]


def test_reexports_are_followed_to_their_module(tmp_path: Path) -> None:
    """super::X where the parent only re-exports X is a dependency on X's module, not the parent."""
    c = crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\npub use a::X;\nuse b::Y as Z;\n",
            "a.rs": "pub struct X;\n",
            "b.rs": "pub struct Y;\nfn f(_: super::X, _: crate::Z) {}\n",
        },
    )
    assert set(c.edges) == {("crate", "crate::a"), ("crate", "crate::b"), ("crate::b", "crate::a")}
    assert cycles(c.edges) == []


def test_comments_strings_and_tests_are_ignored(tmp_path: Path) -> None:
    c = crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b;\nfn f() { b::g() }\n",
            "b.rs": (
                "pub fn g() {\n"
                "    // crate::a::f()\n"
                "    /* outer /* nested */ crate::a::f() */\n"
                '    let _ = (\'"\', "crate::a::f \\" crate::a", r#"crate::a::f"#, \'{\');\n'
                "}\n"
                "/// [`crate::a::f`]\n"
                "#[cfg(test)]\nmod t { use crate::a::*; }\n"
                "mod tests { use super::*; use crate::a; }\n"
            ),
        },
    )
    assert set(c.edges) == {("crate::a", "crate::b")}


def test_inline_modules_belong_to_their_file(tmp_path: Path) -> None:
    files = {
        "lib.rs": "mod a;\n",
        "a.rs": "fn helper() {}\nmod gen {\n    use super::*;\n    pub fn w() { helper() }\n}\npub use gen::*;\n",
    }
    assert cycles(crate(tmp_path, files).edges) == []
    assert cycles(Crate(tmp_path, split_inline=True).edges) == [["crate::a", "crate::a::gen", "crate::a"]]


# --- the workspace ----------------------------------------------------------------------------

KNOWN: dict[str, str] = {}  # crate source dir -> the cycle it is known to have (none today)
CRATES = sorted({str(p.relative_to(REPO)) for p in REPO.glob("crates/*/src")} | {"simulator/src", "python/native/src"})


def _roots(src: Path) -> list[str]:
    roots = [r for r in ("lib.rs", "main.rs") if (src / r).is_file()]
    return roots + sorted(str(p.relative_to(src)) for p in src.glob("bin/*.rs"))


@pytest.mark.parametrize(
    "src",
    [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=KNOWN[s])) if s in KNOWN else s for s in CRATES],
)
def test_no_module_cycles(src: str) -> None:
    roots = _roots(REPO / src)
    assert roots, f"{src}: no lib.rs, main.rs or bin/*.rs"
    problems = []
    for root in roots:
        problems += [f"{src}/{root}: {d}" for d in describe(Crate(REPO / src, root))]
    assert not problems, "\n".join(problems)


def test_the_checker_sees_the_interposer_layers() -> None:
    """libmsprobe's graph is not empty by accident: the layering the README describes is there."""
    edges = set(Crate(REPO / "crates/libmsprobe/src").edges)
    for e in [
        ("crate::interposer::entry", "crate::interposer::dispatch"),
        ("crate::interposer::dispatch", "crate::interposer::aclnn"),
        ("crate::interposer::aclnn", "crate::interposer::capture"),
        ("crate::interposer::activation", "crate::session"),
        ("crate::ffi", "crate::session"),
    ]:
        assert e in edges, sorted(edges)
