"""`meaning` reads the platform's blocks and the HTML-imported markdown of each as the same
words and structure, a repeated title as the title; `form` keeps the blocks as written; verify
counts spaces whose blocks lost structure (`restructured`) apart from `formatting`, and a
page's emoji an import could not carry is no difference."""

from __future__ import annotations

from typing import Any

from syncd.copy import IdMap, Snapshot, compare, render
from syncd.copy.meaning import form, meaning


def test_a_leading_heading_equal_to_the_title_is_the_title() -> None:
    assert meaning("# Intro\n\nWelcome.\n", "Intro") == meaning("Welcome.\n", "Intro") == "Welcome."
    assert meaning("\n\nIntro\n=====\n\nWelcome.", "Intro") == "Welcome."
    assert meaning("# Intro\n\nWelcome.", None) == "# Intro\nWelcome."  # no title given: a heading like another
    assert meaning("# Other\n\nWelcome.", "Intro") != meaning("Welcome.", "Intro")
    assert meaning("## Intro\n\nWelcome.", "Intro") != meaning("Welcome.", "Intro")  # only a level-1 heading
    assert meaning("Welcome.\n\n# Intro", "Intro") != meaning("Welcome.", "Intro")  # only the first line
    assert meaning("# my\\_app *x*\n\nA", "my_app x") == "A"  # the importer's escapes and emphasis


def test_each_block_means_what_its_plain_markdown_says() -> None:
    pairs = [
        ('{% hint style="info" %}\nMind **this**.\n{% endhint %}', "> Mind __this__."),
        ('{% tabs %}\n{% tab title="A" %}\nOne.\n{% endtab %}\n{% tab title="B" %}\nTwo.\n{% endtab %}\n{% endtabs %}', "**A**\n\nOne.\n\n**B**\n\nTwo."),
        ('{% code title="app.py" %}\n```python\nx = 1\n```\n{% endcode %}', "app.py\n\n```python\nx = 1\n```"),
        ('<figure><img src=".gitbook/assets/a.png" alt="A"><figcaption><p>Cap &amp; more</p></figcaption></figure>', "![A](.gitbook/assets/a.png)\n\nCap & more"),
        ("<details>\n\n<summary>More</summary>\n\nHidden.\n\n</details>", "More\n\nHidden."),
        ('{% embed url="https://e.x/v" %}', "<https://e.x/v>"),
        ("$$\na^2\n$$", "```math\na^2\n```"),
        ("$$a^2$$", "```math\na^2\n```"),
        ("| A | B |\n|:--|--:|\n| `x` | *y* |", "| A | B |\n| --- | --- |\n| `x` | y |"),
        ("[f](.gitbook/assets/a%20b.pdf)", "[f](<.gitbook/assets/a b.pdf>)"),
        ("> ```bash\n> ls\n> ```", "```bash\nls\n```"),
    ]
    for source, imported in pairs:
        assert meaning(source) == meaning(imported), (source, meaning(source), meaning(imported))
        assert meaning(source)


def test_what_a_block_holds_is_still_compared() -> None:
    hint = '{% hint style="info" %}\nMind this.\n{% endhint %}'
    assert meaning(hint) != meaning("Mind that.")
    assert meaning('{% tab title="A" %}\nx\n{% endtab %}') != meaning('{% tab title="B" %}\nx\n{% endtab %}')
    assert meaning("```python\nx = 1\n```") != meaning("```bash\nx = 1\n```")  # a code block's language
    assert meaning("```\nx = 1\n```") != meaning("```\nx = 2\n```")
    assert meaning("| a | b |") != meaning("| a b |")  # table cells
    assert meaning("![a](.gitbook/assets/x.png)") != meaning("![a](.gitbook/assets/y.png)")
    assert meaning("- one\n- two") != meaning("one two")


def test_an_unclosed_block_is_text() -> None:
    assert meaning('{% hint style="info" %}\nnever closed') == '{% hint style="info" %}\nnever closed'
    assert meaning("```\n{% hint %}\nx\n{% endhint %}\n```") == "```\n{% hint %}\nx\n{% endhint %}\n```"  # code is code


def test_form_keeps_the_blocks_as_written() -> None:
    hint = '{% hint style="info" %}\nMind this.\n{% endhint %}'
    assert meaning(hint) == meaning("> Mind this.") and form(hint) != form("> Mind this.")
    assert form("*a* and - b", "T") == form("_a_ and - b", "T")  # style alone is formatting, not structure
    assert form("# T\n\nx", "T") == form("x", "T")


def _row(kind: str, row_id: str, data: dict[str, Any], parent: tuple[str, str] | None = None, position: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "id": row_id, "parent_kind": parent[0] if parent else None, "parent_id": parent[1] if parent else None, "position": position, "data": data}


def _org(org: str, space: str, pages: list[tuple[str, str, str | None]]) -> Snapshot:
    rows = [_row("space", space, {"title": "Guide"}, ("organization", org), 0)]
    rows += [_row("page", f"{space}/p{i}", {"title": title, "markdown": markdown, "emoji": emoji}, ("space", space), i) for i, (title, markdown, emoji) in enumerate(pages)]
    return Snapshot.from_rows("t", org, rows)


def _verify(source: list[tuple[str, str, str | None]], target: list[tuple[str, str, str | None]]) -> tuple[dict[str, int], list[str]]:
    idmap = IdMap()
    idmap.put("space", "S", "T", "created")
    result = compare(_org("O", "S", source), _org("P", "T", target), idmap, kinds=("space",))
    return result.counts(), render(result)


def test_verify_counts_lost_structure_apart_from_formatting() -> None:
    page = ("Intro", '# Intro\n\n{% hint style="info" %}\nMind *this*.\n{% endhint %}\n', "1f680")
    counts, lines = _verify([page], [("Intro", "# Intro\n\n> Mind _this_.\n", None)])  # HTML-only, heading kept, emoji lost
    assert (counts["identical"], counts["different"], counts["restructured"], counts["formatting"]) == (1, 0, 1, 0)
    assert lines[-1].endswith("1 spaces whose blocks lost structure in the import: equal")
    counts, lines = _verify([page], [("Intro", '{% hint style="info" %}\nMind _this_.\n{% endhint %}\n', "1f680")])  # restyled only
    assert (counts["restructured"], counts["formatting"]) == (0, 1) and "lost structure" not in lines[-1]
    counts, _ = _verify([page], [page])
    assert (counts["identical"], counts["restructured"], counts["formatting"]) == (1, 0, 0)
    counts, lines = _verify([page], [("Intro", "> Mind _that_.\n", None)])  # other words: a difference
    assert counts["different"] == 1 and not lines[-1].endswith("equal")
    counts, _ = _verify([page], [("Intro", page[1], "1f4a1")])  # another emoji: a difference
    assert counts["different"] == 1
