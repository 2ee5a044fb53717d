#!/usr/bin/env bash
# Fetches feel-scala (org.camunda.feel:feel-engine:1.17.8, the version Zeebe 8.5.8 ships) and its
# runtime dependencies from Maven Central into ~/.cache/waggle-peers/feel-scala/lib.
set -euo pipefail
VERSION=1.17.8
DEST="${FEEL_SCALA_HOME:-$HOME/.cache/waggle-peers/feel-scala}"
if [ -f "$DEST/lib/feel-engine-$VERSION.jar" ]; then
  echo "feel-engine $VERSION already in $DEST/lib"; exit 0
fi
mkdir -p "$DEST/lib"
cat > "$DEST/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>waggle</groupId><artifactId>feel-diff</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.camunda.feel</groupId><artifactId>feel-engine</artifactId><version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
mvn -q -B -f "$DEST/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$DEST/lib"
ls "$DEST/lib"
