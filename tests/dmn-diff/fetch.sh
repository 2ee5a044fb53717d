#!/usr/bin/env bash
# Fetches dmn-scala (org.camunda.bpm.extension.dmn.scala:dmn-engine 1.9.0: `version.dmn-scala` in
# io.camunda:zeebe-parent 8.5.8's pom) and its runtime dependencies from Maven Central into
# ~/.cache/waggle-peers/dmn-scala/lib, pinned as Zeebe 8.5.8's zeebe-dmn module pins them:
# feel-engine 1.17.8, camunda-dmn-model/camunda-xml-model 7.22.0-alpha6, scala-library 2.13.15.
# (zeebe-dmn itself is Java 21 bytecode, and CI has a JDK 17: DmnDiff.java re-does its thin
# wrapper, see there.)
set -euo pipefail
VERSION=1.9.0
DEST="${DMN_SCALA_HOME:-$HOME/.cache/waggle-peers/dmn-scala}"
if [ -f "$DEST/lib/dmn-engine-$VERSION.jar" ] && [ -f "$DEST/lib/camunda-dmn-model-7.22.0-alpha6.jar" ]; then
  echo "dmn-engine $VERSION already in $DEST/lib"; exit 0
fi
rm -rf "$DEST/lib"
mkdir -p "$DEST/lib"
cat > "$DEST/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>waggle</groupId><artifactId>dmn-diff</artifactId><version>1</version>
  <dependencyManagement><dependencies>
    <dependency><groupId>org.camunda.feel</groupId><artifactId>feel-engine</artifactId><version>1.17.8</version></dependency>
    <dependency><groupId>org.camunda.bpm.model</groupId><artifactId>camunda-dmn-model</artifactId><version>7.22.0-alpha6</version></dependency>
    <dependency><groupId>org.camunda.bpm.model</groupId><artifactId>camunda-xml-model</artifactId><version>7.22.0-alpha6</version></dependency>
    <dependency><groupId>org.scala-lang</groupId><artifactId>scala-library</artifactId><version>2.13.15</version></dependency>
  </dependencies></dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.camunda.bpm.extension.dmn.scala</groupId><artifactId>dmn-engine</artifactId><version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
mvn -q -B -f "$DEST/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$DEST/lib"
ls "$DEST/lib"
