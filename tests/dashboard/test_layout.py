"""The composing app's layout (DESIGN.md, Layout; issue 26 §5): one package per page family,
each holding modules named for their job, never a family's prefix on a file name
(`handoff_views.py` is a folder waiting to be made: `handoffs/views.py`)."""

from pathlib import Path

import switchboard

APP = Path(switchboard.__file__).parent
# What belongs to the app as a whole; everything else lives in a family's package.
APP_MODULES = {"__init__", "apps", "api", "urls", "context_processors"}
# Django finds these by their own names (commands, template tag libraries): not page families.
DJANGO_PACKAGES = {"management", "templatetags"}
JOB_MODULES = {"__init__", "views", "context", "forms", "consumers", "queries"}


def families() -> list[Path]:
    return sorted(
        path
        for path in APP.iterdir()
        if (path / "__init__.py").is_file() and path.name not in DJANGO_PACKAGES
    )


def prefixes() -> set[str]:
    """`handoffs_` and `handoff_`, `webhooks_` and `webhook_`, … for every family."""
    names = {path.name for path in families()}
    return {f"{name}_" for name in names} | {f"{name.removesuffix('s')}_" for name in names}


def test_it_has_the_page_families_as_packages():
    assert {p.name for p in families()} >= {"sessions", "handoffs", "console", "retention"}


def test_it_keeps_only_app_wide_modules_at_the_top():
    top = {path.stem for path in APP.glob("*.py")}
    assert top - APP_MODULES == set(), "a page's module belongs in its family's package"


def test_it_names_no_module_after_a_family():
    modules = [*APP.glob("*.py"), *(m for family in families() for m in family.glob("*.py"))]
    prefixed = sorted(
        str(module.relative_to(APP))
        for module in modules
        if module.stem.startswith(tuple(prefixes()))
    )
    assert prefixed == [], "make the prefix a package: handoff_views.py → handoffs/views.py"


def test_it_names_family_modules_for_their_job():
    for family in families():
        odd = {module.stem for module in family.glob("*.py")} - JOB_MODULES
        assert odd == set(), f"{family.name}/: {sorted(odd)} (one job per module: {JOB_MODULES})"
        assert not [p for p in family.iterdir() if p.is_dir() and p.name != "__pycache__"], (
            f"{family.name}/ nests packages"
        )
