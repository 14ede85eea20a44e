# Sourced by ./vmmkit and the scripts: the one place that looks for a Java 25 JDK.
# jdk25_home prints JAVA_HOME when it is a JDK 25+, else the first Temurin/other JDK 25 under
# /usr/lib/jvm (VMMKIT_JVM_ROOT names another folder of JDKs), else nothing. The Maven wrapper's
# Unsafe warning on Java 25 is silenced.
jdk25_home() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ] \
      && "$JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
    echo "$JAVA_HOME"; return
  fi
  local jvms="${VMMKIT_JVM_ROOT:-/usr/lib/jvm}"
  for d in "$jvms"/temurin-25-* "$jvms"/*-25-* "$jvms"/jdk-25*; do
    if [ -x "$d/bin/javac" ]; then echo "$d"; return; fi
  done
}
export MAVEN_OPTS="--sun-misc-unsafe-memory-access=allow ${MAVEN_OPTS:-}"
