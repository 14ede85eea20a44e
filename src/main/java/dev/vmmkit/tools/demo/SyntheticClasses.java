package dev.vmmkit.tools.demo;

import java.util.SplittableRandom;

/**
 * A synthetic classification batch: each class has a random centre, each example is its class's
 * centre plus Gaussian noise; labels cycle through the classes. The same seed gives the same batch.
 *
 * @param inputs row-major {@code [batch, features]}
 * @param labels class indices as floats, {@code [batch]}
 */
record SyntheticClasses(float[] inputs, float[] labels) {

    static SyntheticClasses generate(int batch, int features, int classes, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        float[][] centres = new float[classes][features];
        for (float[] centre : centres) {
            for (int j = 0; j < features; j++) centre[j] = (float) (random.nextDouble() * 2 - 1);
        }
        float[] inputs = new float[batch * features];
        float[] labels = new float[batch];
        for (int i = 0; i < batch; i++) {
            int label = i % classes;
            labels[i] = label;
            for (int j = 0; j < features; j++) {
                inputs[i * features + j] = centres[label][j] + 0.5f * (float) gaussian(random);
            }
        }
        return new SyntheticClasses(inputs, labels);
    }

    private static double gaussian(SplittableRandom random) {
        return Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
    }
}
