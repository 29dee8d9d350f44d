"""Registers the built-in networks; their torch definitions (tcl_plugins.networks.definitions) load on first use."""

from __future__ import annotations

from pathlib import Path

from tcl.api.hookspecs import hookimpl
from tcl.api.registrations import Deferred, NetworkRegistration

IMPL = "tcl_plugins.networks.definitions"
# 200 MetaSchedule candidates of each task of five small networks (data/README.md, "The bundled dataset")
POOL = Path(__file__).resolve().parent / "pool"


@hookimpl
def tcl_register_networks() -> list[NetworkRegistration]:
    return [
        NetworkRegistration(
            name="resnet-18",
            pool=POOL,
            factory=Deferred(IMPL, "resnet18"),
            family="cnn",
            description="ResNet-18, 224x224 image, batch 1 (basic residual blocks, BatchNorm folded at extraction)",
        ),
        NetworkRegistration(
            name="mobilenet-v2",
            factory=Deferred(IMPL, "mobilenet_v2"),
            family="cnn-mobile",
            description="MobileNetV2 width 1.0, 224x224 image, batch 1 (depthwise-separable inverted residuals)",
        ),
        NetworkRegistration(
            name="bert-tiny",
            pool=POOL,
            factory=Deferred(IMPL, "bert_tiny"),
            family="transformer-encoder",
            description="BERT-tiny encoder: 2 layers, hidden 128, 2 heads, sequence 128, vocab 30522",
        ),
        NetworkRegistration(
            name="vit-tiny",
            pool=POOL,
            factory=Deferred(IMPL, "vit_tiny"),
            family="vision-transformer",
            description="ViT-Ti/16: 224x224 image, 12 layers, dim 192, 3 heads",
        ),
        NetworkRegistration(
            name="mlp-mixer",
            pool=POOL,
            factory=Deferred(IMPL, "mlp_mixer"),
            family="mlp-mixer",
            description="MLP-Mixer S/16: 224x224 image, 8 blocks, dim 512, token MLP 256, channel MLP 2048",
        ),
        NetworkRegistration(
            name="gpt-block",
            pool=POOL,
            factory=Deferred(IMPL, "gpt_block"),
            family="transformer-decoder",
            description="GPT-2-small-width decoder: 2 causal blocks, dim 768, 12 heads, sequence 128",
        ),
        NetworkRegistration(
            name="gpt-medium-b4",
            factory=Deferred(IMPL, "gpt_medium_b4"),
            family="transformer-decoder",
            description="GPT-2-medium-width decoder: 1 causal block, dim 1024, 16 heads, MLP 4096, batch 4 x sequence 256",
        ),
        NetworkRegistration(
            name="resnet-50",
            factory=Deferred(IMPL, "resnet50"),
            family="cnn",
            description="ResNet-50, 224x224 image, batch 1 (bottleneck blocks, stride on the 3x3)",
        ),
        NetworkRegistration(
            name="resnet-50-b8",
            factory=Deferred(IMPL, "resnet50_b8"),
            family="cnn",
            description="ResNet-50, 224x224 images, batch 8",
        ),
        NetworkRegistration(
            name="resnext-50",
            factory=Deferred(IMPL, "resnext50"),
            family="cnn",
            description="ResNeXt-50 32x4d, 224x224 image, batch 1 (3x3 convs in 32 groups)",
        ),
        NetworkRegistration(
            name="densenet-121",
            factory=Deferred(IMPL, "densenet121"),
            family="cnn-dense",
            description="DenseNet-121, 224x224 image, batch 1 (growth 32; concatenating blocks of 6/12/24/16 layers)",
        ),
        NetworkRegistration(
            name="googlenet",
            factory=Deferred(IMPL, "googlenet"),
            family="cnn-inception",
            description="GoogLeNet (Inception v1 with BatchNorm), 224x224 image, batch 1 (1x1 | 3x3 | 5x5 | pool branches)",
        ),
        NetworkRegistration(
            name="squeezenet",
            factory=Deferred(IMPL, "squeezenet"),
            family="cnn-fire",
            description="SqueezeNet 1.1, 224x224 image, batch 1 (fire modules, biased convs, no BatchNorm)",
        ),
        NetworkRegistration(
            name="mobilenet-v3",
            factory=Deferred(IMPL, "mobilenet_v3"),
            family="cnn-mobile",
            description="MobileNetV3-Large, 224x224 image, batch 1 (3x3/5x5 depthwise, squeeze-excite, hard-swish)",
        ),
        NetworkRegistration(
            name="mobilenet-v2-nhwc",
            factory=Deferred(IMPL, "mobilenet_v2_nhwc"),
            family="cnn-mobile",
            description="MobileNetV2 compiled in NHWC with HWIO weights, as TensorFlow/TFLite models arrive",
        ),
        NetworkRegistration(
            name="efficientnet-b0",
            factory=Deferred(IMPL, "efficientnet_b0"),
            family="cnn-mobile",
            description="EfficientNet-B0, 224x224 image, batch 1 (MBConv with squeeze-excite, SiLU)",
        ),
        NetworkRegistration(
            name="shufflenet-v2",
            factory=Deferred(IMPL, "shufflenet_v2"),
            family="cnn-mobile",
            description="ShuffleNetV2 1.0x, 224x224 image, batch 1 (channel split and shuffle, depthwise 3x3)",
        ),
        NetworkRegistration(
            name="unet",
            factory=Deferred(IMPL, "unet"),
            family="cnn-segmentation",
            description="U-Net (widths 64-1024), 256x256 image, batch 1 (transposed-conv upsampling, skip concat)",
        ),
        NetworkRegistration(
            name="deeplabv3-head",
            factory=Deferred(IMPL, "deeplabv3_head"),
            family="cnn-segmentation",
            description="DeepLabV3 at output stride 16 (513x513 image): dilated ResNet-50 stage 4 and ASPP "
            "(dilation 2, 6, 12, 18) on 1024x33x33 features",
        ),
        NetworkRegistration(
            name="bert-base",
            factory=Deferred(IMPL, "bert_base"),
            family="transformer-encoder",
            description="BERT-base: embeddings and 1 layer, hidden 768, 12 heads, sequence 128",
        ),
        NetworkRegistration(
            name="bert-base-b8",
            factory=Deferred(IMPL, "bert_base_b8"),
            family="transformer-encoder",
            description="BERT-base: embeddings and 1 layer, hidden 768, 12 heads, batch 8 x sequence 128",
        ),
        NetworkRegistration(
            name="vit-base",
            factory=Deferred(IMPL, "vit_base"),
            family="vision-transformer",
            description="ViT-B/16: 224x224 image, 1 layer, dim 768, 12 heads, MLP 3072",
        ),
        NetworkRegistration(
            name="llama-block",
            factory=Deferred(IMPL, "llama_block"),
            family="transformer-decoder",
            description="Llama decoder layer at TinyLlama-1.1B widths: dim 2048, 32 heads (4 key/value), "
            "rotary positions, RMSNorm, SiLU-gated MLP 5632, sequence 128",
        ),
        NetworkRegistration(
            name="wav2vec2",
            factory=Deferred(IMPL, "wav2vec2"),
            family="audio",
            description="wav2vec 2.0 base on 1 s of 16 kHz audio: conv1d feature encoder, grouped conv1d "
            "positions, 1 transformer layer",
        ),
    ]
