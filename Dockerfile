# One image for every chatscribe process (chat-api, worker, sink); docker-compose.yml picks the
# command. Kafka and PostgreSQL use their official images.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so a source change does not reinstall them.
COPY pyproject.toml README.md ./
COPY models ./models
COPY pipeline ./pipeline
COPY chat_api ./chat_api
RUN pip install .

# `chatscribe db upgrade` runs the Alembic scripts in /app/migrations, found next to the
# `pipeline` package: PYTHONPATH makes Python import the source tree in /app (the same code
# `pip install .` put in site-packages) so that path resolves.
COPY alembic.ini ./
COPY migrations ./migrations
COPY examples ./examples
ENV PYTHONPATH=/app

RUN useradd --create-home --uid 10001 chatscribe
USER chatscribe

EXPOSE 8400
CMD ["chatscribe", "--help"]
