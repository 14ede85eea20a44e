# Sourced by scripts: points JAVA_HOME at a Java 25 (the same search as ./vmmkit).
if [ -z "${JAVA_HOME:-}" ] || ! "$JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
  for d in /usr/lib/jvm/temurin-25-* /usr/lib/jvm/*-25-* /usr/lib/jvm/jdk-25*; do
    if [ -x "$d/bin/javac" ]; then export JAVA_HOME="$d"; break; fi
  done
fi
export MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow ${MAVEN_OPTS:-}"
