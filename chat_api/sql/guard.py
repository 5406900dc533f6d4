"""First line of defence for Semantic SQL: parse one SELECT and refuse everything else.

``parse_query`` accepts a single ``SELECT`` (or ``UNION``/``INTERSECT``/``EXCEPT`` of selects,
with ``WITH``) in the Postgres dialect, as Cube's SQL API does (Cube documentation, "SQL API").
It refuses, with a ``SemanticSqlError``:

- ``parse_error``: text that does not parse, is empty or is longer than ``MAX_SQL_CHARS``.
- ``multiple_statements``: more than one statement (``SELECT 1; DROP TABLE x``).
- ``not_select``: any other statement (DDL, DML, ``COPY``, ``PRAGMA``, ``SET``, ``ATTACH``,
  ``INSTALL``/``LOAD``, ``EXPLAIN``, ``SHOW``, bare ``VALUES``) or a data-modifying CTE.
- ``unsupported_syntax``: ``SELECT ... INTO``, locking clauses, ``LATERAL``, ``VALUES`` lists,
  table functions, ``TABLESAMPLE``, ``ONLY``, recursive CTEs, parameters, and clauses outside
  the supported subset.
- ``forbidden_function``: any function outside ``ALLOWED_FUNCTIONS`` (file access such as
  ``read_csv``, ``glob``, ``read_parquet``; settings; system catalogs; table generators).

Comments are dropped from the tree so nothing a user wrote in one reaches DuckDB. Unquoted
identifiers are folded to lower case, as Postgres does.

``check_executed_sql`` checks the other end: the DuckDB text the compiler produced, the text
that actually runs, parsed again with DuckDB's dialect. It must be one ``SELECT`` (or set
operation), with no statement or clause refused above, functions only from
``ALLOWED_FUNCTIONS`` or the model's own SQL, and tables only the model's physical tables (in
schema ``main``) or CTEs of the query itself. Whatever transpiling changed, the allow-list holds
on what DuckDB receives.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp, parse
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from chat_api.errors import SemanticSqlError

MAX_SQL_CHARS = 20_000
DIALECT = "postgres"
EXECUTED_DIALECT = "duckdb"

ALLOWED_FUNCTIONS = frozenset(
    {
        # Cube's aggregate of a measure
        "MEASURE",
        # operators sqlglot models as functions
        "AND", "OR", "XOR", "EXISTS", "COLLATE", "REGEXP_LIKE", "REGEXP_I_LIKE",
        # aggregates
        "COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN", "MODE", "STDDEV", "STDDEV_POP",
        "STDDEV_SAMP", "VARIANCE", "VARIANCE_POP", "PERCENTILE_CONT", "PERCENTILE_DISC",
        "LOGICAL_AND", "LOGICAL_OR", "GROUP_CONCAT", "CORR", "COVAR_POP", "COVAR_SAMP",
        # window functions
        "ROW_NUMBER", "RANK", "DENSE_RANK", "NTILE", "LAG", "LEAD", "FIRST_VALUE", "LAST_VALUE",
        "PERCENT_RANK", "CUME_DIST",
        # numbers
        "ABS", "ROUND", "FLOOR", "CEIL", "SQRT", "POWER", "LN", "LOG", "EXP", "SIGN", "TRUNC",
        # conditionals and casts
        "CASE", "IF", "COALESCE", "NULLIF", "GREATEST", "LEAST", "CAST", "TRY_CAST",
        # text
        "LOWER", "UPPER", "LENGTH", "SUBSTRING", "CONCAT", "CONCAT_WS", "TRIM", "REPLACE", "LEFT",
        "RIGHT", "STR_POSITION", "INITCAP", "PAD", "SPLIT_PART", "REVERSE",
        # dates
        "DATE_TRUNC", "TIMESTAMP_TRUNC", "EXTRACT", "TIME_TO_STR", "DATE", "CURRENT_DATE",
        "CURRENT_TIMESTAMP", "MAKE_DATE", "STR_TO_DATE",
    }
)  # fmt: skip
"""Function names as sqlglot names them (``DATE_TRUNC`` parses to ``TIMESTAMP_TRUNC``)."""

_QUERY_ARGS = frozenset(
    {"with_", "expressions", "distinct", "from_", "joins", "where", "group", "having", "qualify",
     "windows", "order", "limit", "offset", "this", "expression", "alias"}
)  # fmt: skip
_TABLE_ARGS = frozenset({"this", "alias"})
_JOIN_ARGS = frozenset({"this", "on", "side", "kind", "using"})
_NOT_ALLOWED: tuple[type[exp.Expr], ...] = tuple(
    node
    for name in (
        "Into", "Lock", "Lateral", "Values", "Unnest", "Placeholder", "Parameter",
        "SessionParameter", "Pivot", "Connect", "TableSample", "Hint", "Prior", "Columns",
    )
    if isinstance(node := getattr(exp, name, None), type)
)  # fmt: skip
_STATEMENTS: tuple[type[exp.Expr], ...] = tuple(
    node
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Command", "Copy",
        "Pragma", "Set", "Use", "Transaction", "Commit", "Rollback", "Describe", "LoadData",
        "Attach", "Detach", "Install", "Grant", "Revoke", "Analyze", "Refresh", "Cache",
        "Uncache", "TruncateTable", "Kill", "Summarize", "Show", "Export",
    )
    if isinstance(node := getattr(exp, name, None), type)
)  # fmt: skip


def parse_query(sql: str) -> exp.Query:
    """Parse Semantic SQL into a checked sqlglot tree (see the module docstring for refusals).

    Args:
        sql: One Semantic SQL query, Postgres dialect; a trailing ``;`` is allowed.

    Returns:
        A ``Select`` or set operation with comments removed and identifiers normalised.

    Raises:
        SemanticSqlError: the query is refused; ``code`` says why.
    """
    if not sql.strip() or len(sql) > MAX_SQL_CHARS:
        raise SemanticSqlError("parse_error", f"the query must be 1 to {MAX_SQL_CHARS} characters")
    try:
        statements = [s for s in parse(sql, read=DIALECT) if s is not None]
    except (ParseError, TokenError) as exc:
        raise SemanticSqlError("parse_error", f"the query does not parse: {exc}") from exc
    except RecursionError as exc:
        raise SemanticSqlError("parse_error", "the query is nested too deeply") from exc
    if len(statements) != 1:
        raise SemanticSqlError(
            "multiple_statements" if statements else "parse_error",
            "send exactly one SELECT statement",
        )
    tree = statements[0]
    while isinstance(tree, exp.Subquery) and not tree.alias:
        tree = tree.this
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise SemanticSqlError(
            "not_select", f"only SELECT queries are allowed, not {tree.key.upper()}"
        )
    check_tree(tree)
    return normalize_identifiers(tree, dialect=DIALECT)


def check_tree(tree: exp.Expr) -> None:
    """Refuse statements, clauses and functions outside the subset; drop all comments.

    Raises:
        SemanticSqlError: ``not_select``, ``unsupported_syntax`` or ``forbidden_function``.
    """
    for node in tree.walk():
        node.comments = None
        _check_node(node)


def _check_node(node: exp.Expr) -> None:
    if isinstance(node, _STATEMENTS):
        raise SemanticSqlError("not_select", f"{node.key.upper()} is not allowed; only SELECT")
    if isinstance(node, _NOT_ALLOWED):
        raise SemanticSqlError("unsupported_syntax", f"{node.key.upper()} is not supported")
    if isinstance(node, exp.Func):
        _check_function(node)
    elif isinstance(node, exp.Select | exp.SetOperation | exp.Subquery):
        _check_args(node, _QUERY_ARGS, node.key.upper())
    elif isinstance(node, exp.Table):
        if node.args.get("db") or node.args.get("catalog"):
            raise SemanticSqlError(
                "unknown_view",
                f"{node.sql(dialect=DIALECT)} is not a view: name a view of the data model "
                "without a schema",
            )
        _check_args(node, _TABLE_ARGS, "this table reference")
        if not isinstance(node.this, exp.Identifier):
            raise SemanticSqlError(
                "forbidden_function",
                f"table functions such as {node.this.sql(dialect=DIALECT)} are not allowed; "
                "query the views of the data model",
            )
    elif isinstance(node, exp.Join):
        _check_args(node, _JOIN_ARGS, "this JOIN")
    elif isinstance(node, exp.With) and node.args.get("recursive"):
        raise SemanticSqlError("unsupported_syntax", "WITH RECURSIVE is not supported")
    elif isinstance(node, exp.Group) and set(node.args) - {"expressions"}:
        raise SemanticSqlError(
            "unsupported_syntax", "GROUP BY ROLLUP/CUBE/GROUPING SETS is not supported"
        )


def _check_function(node: exp.Func) -> None:
    name = node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name()
    if name not in ALLOWED_FUNCTIONS:
        raise SemanticSqlError(
            "forbidden_function",
            f"function {name} is not allowed; allowed functions: "
            f"{', '.join(sorted(ALLOWED_FUNCTIONS))}",
        )


def _check_args(node: exp.Expr, allowed: frozenset[str], what: str) -> None:
    extra = sorted(key for key, value in node.args.items() if value and key not in allowed)
    if extra:
        raise SemanticSqlError(
            "unsupported_syntax", f"{what} uses unsupported syntax: {', '.join(extra)}"
        )


def check_grouping(select: exp.Select) -> None:
    """Refuse an aggregating SELECT that selects a dimension it does not group by.

    A SELECT aggregates when it has ``GROUP BY``, ``HAVING`` or an aggregate outside a window.
    Then every column a projection reads outside an aggregate must be a ``GROUP BY`` item, or
    the projection must itself be one (by expression or by position).

    Raises:
        SemanticSqlError: ``missing_group_by``, naming the column and how to fix the query.
    """
    projections = [projection.unalias() for projection in select.expressions]
    group = select.args.get("group")
    aggregates = any(_has_aggregate(projection) for projection in projections)
    if group is None and not select.args.get("having") and not aggregates:
        return
    keys = {_group_key(item, projections) for item in (group.expressions if group else ())}
    for projection in projections:
        if projection.sql() in keys:
            continue
        for column in _loose_columns(projection):
            if column.sql() not in keys:
                raise SemanticSqlError(
                    "missing_group_by",
                    f"{column.name} is selected but not grouped: the query aggregates, so add "
                    f"{column.name} to GROUP BY (or aggregate it)",
                )


def _group_key(item: exp.Expr, projections: list[exp.Expr]) -> str:
    if isinstance(item, exp.Literal) and not item.is_string:
        position = int(item.name)
        if not 1 <= position <= len(projections):
            raise SemanticSqlError(
                "missing_group_by", f"GROUP BY {position} is not a column position"
            )
        return str(projections[position - 1].sql())
    return str(item.sql())


def _has_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.Query):
        return False
    if isinstance(node, exp.Window):
        children = [*node.this.iter_expressions(), *_window_spec(node)]
        return any(_has_aggregate(child) for child in children)
    if isinstance(node, exp.AggFunc):
        return True
    return any(_has_aggregate(child) for child in node.iter_expressions())


def _loose_columns(node: exp.Expr) -> list[exp.Column]:
    """Columns read outside any aggregate.

    Window functions are looked through; a lambda's body reads its own parameters.
    """
    if isinstance(node, exp.Query | exp.AggFunc | exp.Filter | exp.WithinGroup | exp.Lambda):
        return []
    if isinstance(node, exp.Column):
        return [node]
    children = (
        [*node.this.iter_expressions(), *_window_spec(node)]
        if isinstance(node, exp.Window)
        else list(node.iter_expressions())
    )
    return [column for child in children for column in _loose_columns(child)]


def _window_spec(window: exp.Window) -> list[exp.Expr]:
    spec = [*(window.args.get("partition_by") or ())]
    order = window.args.get("order")
    return [*spec, order] if order is not None else spec


def check_executed_sql(
    sql: str, *, tables: Iterable[str], functions: Iterable[str] = ()
) -> exp.Query:
    """Check the DuckDB SQL that is about to run, parsed again (module docstring).

    Args:
        sql: The compiled DuckDB text, exactly as it will be executed.
        tables: The physical table names the model reads (schema ``main``).
        functions: Function names the model's own SQL uses, allowed besides
            ``ALLOWED_FUNCTIONS`` (sqlglot names, upper case).

    Returns:
        The parsed tree of ``sql`` (DuckDB dialect).

    Raises:
        SemanticSqlError: ``parse_error``, ``multiple_statements``, ``not_select``,
            ``unsupported_syntax``, ``forbidden_function`` or ``unknown_view``; the message says
            that the executed query, not the question's SQL, was refused.
    """
    try:
        statements = [s for s in parse(sql, read=EXECUTED_DIALECT) if s is not None]
    except (ParseError, TokenError, RecursionError) as exc:
        raise SemanticSqlError("parse_error", f"the executed query does not parse: {exc}") from exc
    if len(statements) != 1:
        raise SemanticSqlError("multiple_statements", "the executed query is not one statement")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise SemanticSqlError("not_select", f"the executed query is a {tree.key.upper()}")
    allowed_functions = ALLOWED_FUNCTIONS | {name.upper() for name in functions}
    ctes = {cte.alias for cte in tree.find_all(exp.CTE)}
    physical = frozenset(tables)
    try:
        for node in tree.walk():
            _check_executed_node(node, allowed_functions, physical, ctes)
    except SemanticSqlError as exc:
        raise SemanticSqlError(exc.code, f"the executed query was refused: {exc.message}") from exc
    return tree


def _check_executed_node(
    node: exp.Expr, functions: frozenset[str], tables: frozenset[str], ctes: set[str]
) -> None:
    if isinstance(node, _STATEMENTS):
        raise SemanticSqlError("not_select", f"{node.key.upper()} is not allowed")
    if isinstance(node, _NOT_ALLOWED):
        raise SemanticSqlError("unsupported_syntax", f"{node.key.upper()} is not supported")
    if isinstance(node, exp.Func):
        name = node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name()
        if name not in functions:
            raise SemanticSqlError("forbidden_function", f"function {name} is not allowed")
    elif isinstance(node, exp.Table):
        if not isinstance(node.this, exp.Identifier):
            raise SemanticSqlError("forbidden_function", "table functions are not allowed")
        schema, catalog = node.args.get("db"), node.args.get("catalog")
        in_main = catalog is None and (schema is None or schema.name == "main")
        is_cte = schema is None and catalog is None and node.name in ctes
        if not is_cte and not (in_main and node.name in tables):
            raise SemanticSqlError("unknown_view", f"{node.sql()} is not a table of the model")
