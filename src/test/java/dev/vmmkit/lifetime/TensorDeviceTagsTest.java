package dev.vmmkit.lifetime;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

/** Tensors made in a tag region keep their values across a pause and a resume of the tag. */
class TensorDeviceTagsTest {

    @Test
    void taggedTensorsKeepTheirValuesAcrossAPause() {
        try (TensorDevice device = TestDevice.open(LeakDetector.Level.DISABLED)) {
            device.tags().beginTagRegion("weights", true);
            Tensor w = device.uniform(7, -1f, 1f, 64, 300);
            device.tags().endTagRegion();
            device.tags().beginTagRegion("scratch", false);
            Tensor s = device.zeros(1000);
            device.tags().endTagRegion();
            float[] before = w.toArray();
            device.tags().pause(null);
            device.tags().resume(null);
            assertArrayEquals(before, w.toArray(), "weights after a pause and a resume");
            s.copyFrom(new float[1000]);
            Tensor sum = Ops.add(s, s);
            assertArrayEquals(new float[1000], sum.toArray(), "the scratch tensor is usable again");
        }
    }
}
