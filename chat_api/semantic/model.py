"""The semantic data model: Cube's YAML format, loaded, validated and resolved into views.

Source of the format: Cube documentation, "Data modeling" (cubes, dimensions, measures, joins,
views) and "Access policies"; the subset we read is summarised in
``field-notes.md`` § "Semantic data model". The pydantic models of the files (``Cube``,
``Dimension``, ``Measure``, ``Join``, ``View``, ``ViewCube``, ``AccessPolicy``, ...) live in
``chat_api.semantic.cube_schema`` and are re-exported here. Keys we do not use
(``pre_aggregations``, ``segments``, ...) are tolerated and ignored; ``meta`` is kept on members
and views for the agent.

Loading gives a ``SemanticModel``: the cubes as written, plus every view resolved into members
named ``view.member`` with their type, owning cube and join path, and every member's SQL rendered
once into a sqlglot expression over the physical tables (``chat_api.semantic.templates``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from chat_api.errors import ModelError
from chat_api.semantic.conditions import parse_condition, template_references
from chat_api.semantic.cube_schema import (
    AccessPolicy,
    Cube,
    Dimension,
    DimensionType,
    FilterOperator,
    FilterRule,
    IncludeItem,
    Join,
    Measure,
    MeasureFilter,
    MeasureType,
    MemberLevel,
    ModelFile,
    PolicyCondition,
    Relationship,
    RowLevel,
    View,
    ViewCube,
)
from chat_api.semantic.templates import RenderedModel, render_model

AggType = Literal["count", "countDistinct", "sum", "avg", "min", "max", "number"]
MemberKind = Literal["dimension", "measure"]

__all__ = [
    "AccessPolicy", "AggType", "Cube", "Dimension", "DimensionType", "FilterOperator",
    "FilterRule", "IncludeItem", "Join", "Measure", "MeasureFilter", "MeasureType", "Member",
    "MemberKind", "MemberLevel", "ModelFile", "PolicyCondition", "Relationship", "ResolvedView",
    "RowLevel", "SemanticModel", "View", "ViewCube", "load_model", "policy_attributes",
]  # fmt: skip

DEFAULT_MODEL_FOLDER = Path(__file__).resolve().parents[1] / "data_model" / "main"
_ATTRIBUTE = re.compile(r"userAttributes\.([A-Za-z_][A-Za-z0-9_]*)")
FAN_OUT_RELATIONSHIPS = frozenset({"one_to_many", "has_many"})
REPEATING_RELATIONSHIPS = frozenset({"many_to_one", "belongs_to"})
AGG_TYPES: Mapping[str, AggType] = MappingProxyType(
    {"count": "count", "count_distinct": "countDistinct", "sum": "sum", "avg": "avg",
     "min": "min", "max": "max", "number": "number"}
)  # fmt: skip


@dataclass(frozen=True)
class Member:
    """One member of a view, as the agent sees it (``flights.carrier_name``).

    ``type`` is ``string|number|time|boolean`` for dimensions and ``number`` for measures, which
    also carry ``agg_type`` (``count``, ``countDistinct``, ``sum``, ``avg``, ``min``, ``max`` or
    ``number`` for a calculated measure). ``cube``/``cube_member`` name the definition it comes
    from; ``join_path`` is the chain of cubes from the view's root to ``cube``.
    """

    view: str
    name: str
    kind: MemberKind
    type: DimensionType
    title: str
    description: str
    cube: str
    cube_member: str
    join_path: tuple[str, ...]
    agg_type: AggType | None = None
    primary_key: bool = False
    public: bool = True
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def qualified(self) -> str:
        """``view.member``."""
        return f"{self.view}.{self.name}"


@dataclass(frozen=True)
class ResolvedView:
    """A view with its members in declaration order and the join path of each of its cubes.

    ``multiplied`` names the cubes whose rows the view's joins can repeat (Cube documentation,
    "Joins", relationship types): every cube outside the far side of a ``one_to_many`` join, and
    every cube on the far side of a ``many_to_one`` join. Their measures are aggregated once per
    primary key (``chat_api.sql.relations``), as Cube does, so a customer with three orders is
    one customer.
    """

    name: str
    title: str
    description: str
    root: str
    members: tuple[Member, ...]
    join_paths: Mapping[str, tuple[str, ...]]
    policies: tuple[AccessPolicy, ...] = ()
    public: bool = True
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    multiplied: frozenset[str] = frozenset()
    _by_name: Mapping[str, Member] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {member.name: member for member in self.members})

    def member(self, name: str) -> Member | None:
        """The member called ``name`` (unqualified), or ``None``."""
        return self._by_name.get(name)


@dataclass(frozen=True)
class SemanticModel:
    """The loaded model: cubes as written, resolved views, and each definition's file.

    ``files`` maps ``"cubes.<name>"`` and ``"views.<name>"`` to the YAML file defining it.
    ``rendered`` holds the physical SQL of every cube member, join and table; the compiler and
    the policies read it.
    """

    cubes: Mapping[str, Cube]
    views: Mapping[str, ResolvedView]
    files: Mapping[str, str]
    rendered: RenderedModel = field(repr=False, compare=False)

    def view(self, name: str) -> ResolvedView:
        """The view called ``name``.

        Raises:
            KeyError: no such view.
        """
        if name not in self.views:
            raise KeyError(f"unknown view {name!r}; views: {', '.join(sorted(self.views))}")
        return self.views[name]

    def member(self, qualified: str) -> Member:
        """The member called ``view.member``.

        Raises:
            KeyError: no such view or member.
        """
        view_name, _, member_name = qualified.partition(".")
        member = self.view(view_name).member(member_name)
        if member is None:
            raise KeyError(f"unknown member {qualified!r}")
        return member


def policy_attributes(model: SemanticModel) -> tuple[str, ...]:
    """The user attributes the model's access policies read (``userAttributes.<name>``).

    A server declares them besides ``CHATSCRIBE_USER_ATTRIBUTES``, so a model whose policies
    filter on ``region`` accepts ``userAttributes.region`` without more configuration.
    """
    policies = [*(v.policies for v in model.views.values())]
    policies += [c.access_policy for c in model.cubes.values()]
    texts = [policy.model_dump_json(by_alias=True) for group in policies for policy in group]
    return tuple(dict.fromkeys(m for text in texts for m in _ATTRIBUTE.findall(text)))


def load_model(folder: Path = DEFAULT_MODEL_FOLDER) -> SemanticModel:
    """Load every ``*.yml``/``*.yaml`` file of ``folder`` into one validated model.

    Args:
        folder: A folder of Cube YAML files (each with top-level ``cubes:`` and/or ``views:``);
            defaults to ``chat_api/data_model/main``.

    Returns:
        The model, with every view resolved and every member's SQL rendered.

    Raises:
        ModelError: unreadable YAML, a field of the wrong shape, duplicate cube/view/member
            names, a join path along a join that does not exist, an include naming no member,
            a template naming no cube or member, SQL that does not parse, or a policy condition
            outside the grammar of ``chat_api.semantic.conditions``. ``file`` and ``path`` say
            where.
    """
    cubes: dict[str, Cube] = {}
    views: dict[str, View] = {}
    files: dict[str, str] = {}
    paths = sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")])
    if not paths:
        raise ModelError(f"no YAML files in {folder}", file=str(folder))
    for path in paths:
        parsed = _read_file(path)
        _collect(cubes, parsed.cubes, files, path.name, "cubes")
        _collect(views, parsed.views, files, path.name, "views")
    for cube in cubes.values():
        _check_cube(cube, files[f"cubes.{cube.name}"])
    if not views:
        views = _cube_views(cubes, files)
    resolved = {
        view.name: _resolve_view(view, cubes, files[f"views.{view.name}"])
        for view in views.values()
    }
    rendered = render_model(cubes, resolved, files)
    return SemanticModel(
        cubes=MappingProxyType(cubes),
        views=MappingProxyType(resolved),
        files=MappingProxyType(files),
        rendered=rendered,
    )


def _cube_views(cubes: Mapping[str, Cube], files: dict[str, str]) -> dict[str, View]:
    """A model of cubes only: each public cube is queried as a view of its own name.

    The view shows the cube's public members and, prefixed with the joined cube's name, the
    dimensions of the cubes it joins many-to-one (Cube queries such a cube directly; our
    compiler and reader read views only).
    """
    views: dict[str, View] = {}
    for cube in cubes.values():
        if not cube.public:
            continue
        joined = [
            ViewCube(
                join_path=f"{cube.name}.{join.name}",
                includes=tuple(d.name for d in cubes[join.name].dimensions if d.public),
                prefix=True,
            )
            for join in cube.joins
            if join.relationship not in FAN_OUT_RELATIONSHIPS
            and join.name in cubes
            and join.name != cube.name
        ]
        own = ViewCube(join_path=cube.name, includes="*")
        views[cube.name] = View(
            name=cube.name, title=cube.title, description=cube.description,
            cubes=(own, *(j for j in joined if j.includes)), meta=cube.meta,
        )  # fmt: skip
        files[f"views.{cube.name}"] = files[f"cubes.{cube.name}"]
    return views


def _read_file(path: Path) -> ModelFile:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError(f"cannot read YAML: {exc}", file=path.name) from exc
    try:
        return ModelFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ModelError(first["msg"], file=path.name, path=where) from exc


def _collect(
    into: dict[str, Any], items: tuple[Any, ...], files: dict[str, str], file: str, kind: str
) -> None:
    for item in items:
        key = f"{kind}.{item.name}"
        if key in files:
            raise ModelError(f"duplicate name (also in {files[key]})", file=file, path=key)
        into[item.name] = item
        files[key] = file


def _check_cube(cube: Cube, file: str) -> None:
    names = [member.name for member in cube.members]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ModelError(f"duplicate member {duplicates[0]}", file=file, path=f"cubes.{cube.name}")
    if (cube.sql_table is None) == (cube.sql is None):
        raise ModelError(
            "give exactly one of sql_table and sql", file=file, path=f"cubes.{cube.name}"
        )
    _check_policies(cube.access_policy, set(names), file, f"cubes.{cube.name}.access_policy")


def _check_policies(
    policies: tuple[AccessPolicy, ...], members: set[str], file: str, path: str
) -> None:
    for index, policy in enumerate(policies):
        where = f"{path}.{index}"
        if not policy.group_names:
            raise ModelError("an access policy needs group, groups or role", file=file, path=where)
        try:
            for condition in policy.conditions:
                parse_condition(condition.if_)
            rules = policy.row_level.filters if policy.row_level else ()
            _check_rules(rules, members)
        except ModelError as exc:
            raise ModelError(exc.message, file=file, path=where) from exc
        names = (
            (policy.member_level.includes, policy.member_level.excludes)
            if policy.member_level
            else ()
        )
        for listed in names:
            unknown = sorted(set(listed) - members - {"*"}) if listed != "*" else []
            if unknown:
                raise ModelError(
                    f"member_level names unknown member {unknown[0]}", file=file, path=where
                )


def _check_rules(rules: tuple[FilterRule, ...], members: set[str]) -> None:
    for rule in rules:
        nested = (rule.or_ or ()) + (rule.and_ or ())
        if nested:
            _check_rules(nested, members)
            continue
        if rule.member is None or rule.operator is None:
            raise ModelError("a row-level filter needs member and operator (or an or/and list)")
        if rule.member.rpartition(".")[2] not in members:
            raise ModelError(f"row-level filter names unknown member {rule.member}")
        takes_values = rule.operator not in ("set", "notSet")
        if takes_values != bool(rule.values):
            need = "needs values" if takes_values else "takes no values"
            raise ModelError(f"operator {rule.operator} {need}")
        for value in rule.values:
            if isinstance(value, str):
                template_references(value)


def _resolve_view(view: View, cubes: Mapping[str, Cube], file: str) -> ResolvedView:
    join_paths: dict[str, tuple[str, ...]] = {}
    members: list[Member] = []
    for index, view_cube in enumerate(view.cubes):
        where = f"views.{view.name}.cubes.{index}"
        path = _check_join_path(view_cube.join_path, cubes, file, where)
        cube_name = path[-1]
        if join_paths.setdefault(cube_name, path) != path:
            raise ModelError(f"cube {cube_name} reached by two join paths", file=file, path=where)
        members.extend(_view_members(view.name, view_cube, cubes[cube_name], path, file, where))
    if not join_paths:
        raise ModelError("a view needs at least one cube", file=file, path=f"views.{view.name}")
    roots = {path[0] for path in join_paths.values()}
    names = [member.name for member in members]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if len(roots) > 1 or duplicates:
        problem = (
            f"duplicate member {duplicates[0]}"
            if duplicates
            else "join paths must share one root cube"
        )
        raise ModelError(problem, file=file, path=f"views.{view.name}")
    _check_policies(view.access_policy, set(names), file, f"views.{view.name}.access_policy")
    multiplied = _multiplied_cubes(join_paths, cubes)
    _check_primary_keys(multiplied, members, cubes, file, f"views.{view.name}")
    return ResolvedView(
        name=view.name,
        title=view.title or _humanize(view.name),
        description=view.description,
        root=roots.pop(),
        members=tuple(members),
        join_paths=MappingProxyType(join_paths),
        policies=view.access_policy,
        public=view.public,
        meta=view.meta,
        multiplied=multiplied,
    )


def _multiplied_cubes(
    join_paths: Mapping[str, tuple[str, ...]], cubes: Mapping[str, Cube]
) -> frozenset[str]:
    """The cubes whose rows the joins of a view repeat (``ResolvedView`` docstring)."""
    multiplied: set[str] = set()
    for path in join_paths.values():
        if len(path) < 2:
            continue
        join = cubes[path[-2]].join(path[-1])
        relationship = join.relationship if join is not None else "many_to_one"
        far_side = {cube for cube, other in join_paths.items() if other[: len(path)] == path}
        if relationship in FAN_OUT_RELATIONSHIPS:
            multiplied |= set(join_paths) - far_side
        elif relationship in REPEATING_RELATIONSHIPS:
            multiplied |= far_side
    return frozenset(multiplied)


def _check_primary_keys(
    multiplied: frozenset[str], members: list[Member], cubes: Mapping[str, Cube], file: str,
    where: str,
) -> None:  # fmt: skip
    """A measure of a repeated cube is counted once per primary key, so the cube needs one."""
    for member in members:
        if member.kind != "measure" or member.cube not in multiplied:
            continue
        if not any(d.primary_key for d in cubes[member.cube].dimensions):
            raise ModelError(
                f"measure {member.name} of cube {member.cube} is repeated by the view's joins; "
                f"give cube {member.cube} a primary_key dimension so each row counts once",
                file=file,
                path=where,
            )


def _check_join_path(
    join_path: str, cubes: Mapping[str, Cube], file: str, where: str
) -> tuple[str, ...]:
    path = tuple(join_path.split("."))
    for step, name in enumerate(path):
        if name not in cubes:
            raise ModelError(
                f"join path {join_path} names unknown cube {name}", file=file, path=where
            )
        if step and cubes[path[step - 1]].join(name) is None:
            raise ModelError(f"cube {path[step - 1]} has no join to {name}", file=file, path=where)
    return path


def _view_members(
    view: str, view_cube: ViewCube, cube: Cube, path: tuple[str, ...], file: str, where: str
) -> list[Member]:
    if view_cube.includes == "*":
        wanted = [IncludeItem(name=m.name) for m in cube.members if m.public]
    else:
        wanted = [IncludeItem(name=i) if isinstance(i, str) else i for i in view_cube.includes]
    prefix = f"{view_cube.alias or cube.name}_" if view_cube.prefix else ""
    members = []
    for item in wanted:
        if item.name in view_cube.excludes:
            continue
        definition = cube.find(item.name)
        if definition is None:
            raise ModelError(f"cube {cube.name} has no member {item.name}", file=file, path=where)
        members.append(_member(view, item, definition, cube.name, path, prefix))
    return members


def _member(
    view: str,
    item: IncludeItem,
    definition: Dimension | Measure,
    cube: str,
    path: tuple[str, ...],
    prefix: str,
) -> Member:
    is_measure = isinstance(definition, Measure)
    return Member(
        view=view,
        name=item.alias or f"{prefix}{definition.name}",
        kind="measure" if is_measure else "dimension",
        type="number" if isinstance(definition, Measure) else definition.type,
        title=item.title or definition.title or _humanize(definition.name),
        description=item.description if item.description is not None else definition.description,
        cube=cube,
        cube_member=definition.name,
        join_path=path,
        agg_type=AGG_TYPES[definition.type] if isinstance(definition, Measure) else None,
        primary_key=isinstance(definition, Dimension) and definition.primary_key,
        public=definition.public,
        meta=item.meta if item.meta is not None else definition.meta,
    )


def _humanize(name: str) -> str:
    return name.replace("_", " ").strip().capitalize()
